"""Running the app under uvicorn on a socket bound before start-up (so the real port is known at once)."""

from __future__ import annotations

import errno
import logging
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
    except OverflowError as exc:  # a port out of range, from a caller that skipped the option's check
        sock.close()
        raise ConfigError(f"`port` {port}: a port is 1-65535 (0: any free port)") from exc
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"cannot listen on {host}:{port}: the port is already in use; pick another `port` "
                "(0: any free port) or stop what is listening there"
            ) from exc
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def uvicorn_level(level: str) -> str:
    """uvicorn speaks from warnings up: rlmx's request log replaces its access log and start-up lines."""
    return level if logging.getLevelName(level.upper()) >= logging.WARNING else "warning"


def isolation_summary(settings: ServeSettings) -> str:
    """The isolation layer each sandbox backend the profiles use would get here (rlmx.sandbox.probe)."""
    from rlmx.sandbox.probe import startup_line

    backends = sorted({p.built.spec.sandbox.backend for p in settings.profiles.values()}) or ["process"]
    if settings.sandbox is not None:
        backends = [settings.sandbox.backend]
    return "; ".join(startup_line(b) if len(backends) == 1 else f"{b}: {startup_line(b)}" for b in backends)


def run_server(settings: ServeSettings, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve until interrupted. Prints one line with the base URL on stderr once listening; then the
    request log (rlmx.serve.logs) at `log_level`."""
    import uvicorn

    from rlmx.serve.app import create_app
    from rlmx.serve.logs import configure_logging

    configure_logging(log_level)
    sock = bind(host, port)
    actual_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        create_app(settings),
        log_level="debug" if log_level == "debug" else uvicorn_level(log_level),
        lifespan="on",  # its shutdown closes the sessions still open (their REPLs and workers)
        timeout_graceful_shutdown=10,
        access_log=False,
    )
    server = uvicorn.Server(config)
    names = ", ".join(p.served_name for p in settings.profiles.values())
    auth = "bearer token required" if settings.token else "NO AUTH (loopback only)"
    sys.stderr.write(f"rlmx serve: listening on http://{shown}:{actual_port}/v1 ({auth}; models: {names})\n")
    if not is_loopback(host):
        sys.stderr.write("rlmx serve: warning: not a loopback bind and no TLS; put it behind a TLS proxy\n")
    sys.stderr.write(f"rlmx serve: model code runs isolated by {isolation_summary(settings)}\n")
    sys.stderr.flush()
    server.run(sockets=[sock])
