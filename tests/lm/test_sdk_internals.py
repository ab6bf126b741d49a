"""Tests that reach into the openai SDK's private attributes (marker `sdk_internals`).

They check what rlmx sets up inside the SDK's clients: one shared TLS context (on the httpx
transport's connection pool, `client._client._transport._pool`) and the platform the SDK puts in its
`x-stainless-*` headers (`client._platform`), given before the first request. None of it is public
API: when an SDK upgrade renames these, these tests fail by name (`pytest -m sdk_internals`), and the
fix belongs in rlmx's client setup or here, not in the behaviour the other suites test. They run by
default like every other test.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from rlmx.lm.base import CallSettings
from rlmx.lm.openai_compat import PROXY_ENVS, OpenAICompatLM, no_tls_expected_context, shared_ssl_context
from rlmx.testing import ScriptedServer

pytestmark = pytest.mark.sdk_internals


def test_every_client_shares_one_tls_context_and_plain_http_loads_no_ca_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in PROXY_ENVS:
        monkeypatch.delenv(name, raising=False)
    a = OpenAICompatLM("a", base_url="https://127.0.0.1:9/v1")
    b = OpenAICompatLM("b", base_url="https://localhost:9/v1")
    local = OpenAICompatLM("c", base_url="http://127.0.0.1:9/v1")
    assert shared_ssl_context() is shared_ssl_context()
    for lm in (a, b):
        assert _pool_of(lm)._ssl_context is shared_ssl_context()
    plain = _pool_of(local)._ssl_context
    assert plain is no_tls_expected_context() and plain is not shared_ssl_context()
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname  # TLS there fails, never passes
    assert plain.get_ca_certs() == [] and shared_ssl_context().get_ca_certs()
    monkeypatch.setenv("HTTP_PROXY", "https://proxy.example:3128")  # TLS to a proxy: the real CA store
    assert (
        _pool_of(OpenAICompatLM("d", base_url="http://127.0.0.2:9/v1"))._ssl_context is shared_ssl_context()
    )


def _pool_of(lm: OpenAICompatLM) -> Any:
    return lm._client_factory(lm)._client._transport._pool  # type: ignore[attr-defined]


def test_the_sdk_s_platform_header_is_worked_out_once_not_on_each_client_s_first_request() -> None:
    from openai._base_client import get_platform

    from rlmx.lm.openai_compat import sdk_platform

    with ScriptedServer(lambda m, r: "fine") as srv:
        lm = OpenAICompatLM("m", base_url=srv.url)
        client = lm._client_factory(lm)
        assert client._platform is sdk_platform()  # given before any request: no thread hop for it
        asyncio.run(lm.complete([{"role": "user", "content": "q"}], CallSettings()))
        (request,) = srv.requests
    assert request.headers["x-stainless-os"] == str(get_platform())  # the header the SDK would send
