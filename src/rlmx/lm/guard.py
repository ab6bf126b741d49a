"""The real-provider guard: with `RLMX_FORBID_REAL_PROVIDERS=1` (set by
`rlmx.testing.forbid_real_providers()`), an LM may only be built for an endpoint on this machine. The
built-in providers call `check_endpoint` when they are constructed; an LM class of your own should too,
so a test suite that forbids real providers cannot reach one through it."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from rlmx.errors import RealProviderForbidden

FORBID_ENV = "RLMX_FORBID_REAL_PROVIDERS"
LOOPBACK_NAMES = {"localhost", "::1"}


def is_loopback(url: str | None) -> bool:
    """Whether `url` names this machine (127.0.0.0/8, localhost, ::1). None (a provider's default
    endpoint) is not."""
    if not url:
        return False
    host = urlparse(url).hostname or ""
    return host in LOOPBACK_NAMES or host.startswith("127.")


def check_endpoint(url: str | None) -> None:
    """Raise `RealProviderForbidden` when real providers are forbidden and `url` (None: the provider's
    default, a remote one) is not on this machine."""
    if os.environ.get(FORBID_ENV) != "1" or is_loopback(url):
        return
    host = urlparse(url).hostname if url else None
    raise RealProviderForbidden(
        f"{FORBID_ENV}=1 forbids calls to real providers, but this model points at {host or 'its default endpoint'}"
    )
