"""What `rlmx serve` is configured with, and the checks that keep a careless configuration from starting."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field

from rlmx.errors import ConfigError
from rlmx.sandbox.base import SandboxSettings
from rlmx.serve.profiles import Profile
from rlmx.serve.roots import Roots

TOKEN_ENV = "RLMX_SERVE_TOKEN"


@dataclass
class ServeSettings:
    profiles: dict[str, Profile]
    roots: Roots = field(default_factory=Roots)
    token: str | None = None  # None only with --no-auth on a loopback bind
    max_request_bytes: int = 32 * 2**20
    max_context_bytes: int = 512 * 2**20
    context_threshold: int = 8_000  # message text parts longer than this (characters) become context
    max_running: int = 2
    max_queued: int = 8
    trace: bool = True
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)

    def __post_init__(self) -> None:
        if not self.profiles:
            raise ConfigError("no profiles to serve: give --model or --profiles FILE")
        checks = [
            (self.max_request_bytes > 0, "--max-request-bytes must be > 0"),
            (self.max_context_bytes > 0, "--max-context-bytes must be > 0"),
            (self.context_threshold > 0, "--context-threshold must be > 0"),
            (self.max_running >= 1, "--max-running must be >= 1"),
            (self.max_queued >= 0, "--max-queued must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_token(token: str | None, *, no_auth: bool, host: str) -> str | None:
    """The bearer token callers must send, or None when auth is explicitly off on a loopback bind."""
    if no_auth:
        if not is_loopback(host):
            raise ConfigError(
                f"--no-auth is only allowed on a loopback bind (127.0.0.1, ::1), not {host}; "
                f"set {TOKEN_ENV} or pass --token"
            )
        return None
    token = token or os.environ.get(TOKEN_ENV)
    if not token:
        raise ConfigError(
            f"no bearer token: set {TOKEN_ENV} (e.g. export {TOKEN_ENV}=$(openssl rand -hex 24)) or pass --token; "
            "on 127.0.0.1 you may pass --no-auth instead"
        )
    if len(token) < 8:
        raise ConfigError("the bearer token is too short: use at least 8 characters")
    return token
