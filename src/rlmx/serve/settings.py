"""What `rlmx serve` is configured with, and the checks that keep a careless configuration from starting."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rlmx.errors import ConfigError
from rlmx.paths import trace_dir
from rlmx.sandbox.base import SandboxSettings
from rlmx.serve.profiles import ServedProfile
from rlmx.serve.roots import Roots

TOKEN_ENV = "RLMX_SERVE_TOKEN"


def own_trace_dir(kind: str) -> Path:
    """Where a server's runs write their traces unless told otherwise: a folder of its own beside
    `rlmx ask`'s (`$XDG_STATE_HOME/rlmx/serve-traces`, `.../mcp-traces`), so that what one kind of caller
    can read (the MCP `trace` tool) holds none of the runs of others."""
    return trace_dir(kind)


def trace_file(trace_dir: Path, run_id: str) -> Path:
    """A run's trace file, named like the engine's own: `<UTC time>-<run id>.jsonl`."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return trace_dir / f"{stamp}-{run_id}.jsonl"


def prepare_trace_dir(path: Path | None, kind: str) -> Path:
    """The trace folder (`--trace-dir`, else the server's own), made now and readable by its owner only,
    so a folder that cannot be written fails at start-up rather than at the first run."""
    folder = (path.expanduser() if path is not None else own_trace_dir(kind)).resolve()
    try:
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True)
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"`trace_dir` {folder}: not a folder this user can write in")
    except OSError as exc:
        raise ConfigError(f"`trace_dir` {folder}: cannot create it: {exc.strerror or exc}") from exc
    return folder


@dataclass
class ServeSettings:
    profiles: dict[str, ServedProfile]
    roots: Roots = field(default_factory=Roots)
    token: str | None = None  # None only with --no-auth on a loopback bind
    max_request_bytes: int = 32 * 2**20
    max_context_bytes: int = 512 * 2**20
    context_threshold: int = 8_000  # message text parts longer than this (characters) become context
    # hosts whose https image URLs a request's image_url parts may name (empty: data URLs only)
    image_url_hosts: tuple[str, ...] = ()
    max_running: int = 2
    max_queued: int = 8
    max_sessions: int = 16  # open sessions at once (0: none); a new one beyond: 429
    session_idle_s: float = 600.0  # a session without a question this long closes (its id: 404)
    trace: bool = True
    trace_dir: Path = field(default_factory=lambda: own_trace_dir("serve"))
    sandbox: SandboxSettings | None = None  # None: each profile's own (its `sandbox` key, the config's)

    def __post_init__(self) -> None:
        if not self.profiles:
            raise ConfigError("no profiles to serve: give `model` or `profiles_file` FILE")
        checks = [
            (self.max_request_bytes > 0, "`max_request_bytes` must be > 0"),
            (self.max_context_bytes > 0, "`max_context_bytes` must be > 0"),
            (self.context_threshold > 0, "`context_threshold` must be > 0"),
            (self.max_running >= 1, "`max_running` must be >= 1"),
            (self.max_queued >= 0, "`max_queued` must be >= 0"),
            (self.max_sessions >= 0, "`max_sessions` must be >= 0"),
            (self.session_idle_s > 0, "`session_idle_s` must be > 0"),
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
                f"`no_auth` is only allowed on a loopback bind (127.0.0.1, ::1), not {host}; "
                f"set {TOKEN_ENV} or pass `token`"
            )
        return None
    token = token or os.environ.get(TOKEN_ENV)
    if not token:
        raise ConfigError(
            f"no bearer token: set {TOKEN_ENV} (e.g. export {TOKEN_ENV}=$(openssl rand -hex 24)) or pass `token`; "
            "on 127.0.0.1 you may pass `no_auth` instead"
        )
    if len(token) < 8:
        raise ConfigError("the bearer token is too short: use at least 8 characters")
    return token
