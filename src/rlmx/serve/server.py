"""Running the app under uvicorn on a socket bound before start-up (so the real port is known at once)."""

from __future__ import annotations

import socket
import sys

from rlmx.errors import ConfigError
from rlmx.serve.settings import ServeSettings, is_loopback


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on connections of sockets that say
    # so, and without it every reply on a kept-alive connection waited ~40 ms (Nagle + delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port"
        ) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run_server(settings: ServeSettings, *, host: str, port: int, log_level: str = "warning") -> None:
    """Serve until interrupted. Prints one line with the base URL on stderr once listening."""
    import uvicorn

    from rlmx.serve.app import create_app

    sock = bind(host, port)
    actual_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        create_app(settings),
        log_level=log_level,
        lifespan="off",
        timeout_graceful_shutdown=10,
        access_log=log_level in ("info", "debug"),
    )
    server = uvicorn.Server(config)
    names = ", ".join(p.served_name for p in settings.profiles.values())
    auth = "bearer token required" if settings.token else "NO AUTH (loopback only)"
    sys.stderr.write(f"rlmx serve: listening on http://{shown}:{actual_port}/v1 ({auth}; models: {names})\n")
    if not is_loopback(host):
        sys.stderr.write("rlmx serve: warning: not a loopback bind and no TLS; put it behind a TLS proxy\n")
    sys.stderr.flush()
    server.run(sockets=[sock])
