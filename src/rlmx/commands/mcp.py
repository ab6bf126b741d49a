"""`rlmx mcp`: an MCP server (stdio by default) with the tools `ask` and `trace`."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rlmx.commands import options as opt
from rlmx.commands.profiles import load_profiles
from rlmx.commands.run_options import SERVED_LAYOUT, with_run_options
from rlmx.errors import ConfigError
from rlmx.outcomes import EXIT_INTERRUPTED


@with_run_options(layout=("root", *SERVED_LAYOUT))
def mcp(
    root: Annotated[
        list[Path],
        typer.Option("--root", help="A folder the tools may read; repeatable. Paths outside are refused."),
    ] = [],  # noqa: B006
    name: Annotated[str | None, typer.Option(help="Profile name (default: the model's name).")] = None,
    profiles_file: opt.ProfilesFile = None,
    max_running: Annotated[int, typer.Option(help="Runs at once; more calls wait.")] = 2,
    max_context_bytes: opt.MaxContextBytes = 512 * 2**20,
    max_sessions: opt.MaxSessions = 16,
    session_idle_s: opt.SessionIdleS = 600.0,
    no_trace: opt.NoTrace = False,
    trace_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder for the runs' traces, the only one the trace tool reads "
            "(default: $XDG_STATE_HOME/rlmx/mcp-traces)."
        ),
    ] = None,
    transport: Annotated[
        str, typer.Option(help="stdio, or http (streamable HTTP, loopback only).")
    ] = "stdio",
    host: Annotated[
        str, typer.Option(help="With --transport http: the address (loopback only).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="With --transport http: the port (0: any free port).")
    ] = 8765,
    **run: Any,
) -> None:
    """Serve the MCP tools `ask` (an RLM run over files under --root) and `trace` (summarise a run).

    The runs use the profiles of --profiles; without it and without --model, the config file's; else one
    profile made of --model (default: the model `rlmx ask` would use), --sub-model, --base-url, --name,
    the sampling options, the prompt options and the limits; --tools adds tools to every profile."""
    from rlmx.serve.roots import Roots
    from rlmx.serve.settings import is_loopback, prepare_trace_dir

    try:
        from rlmx.mcp_server import McpSettings, build_server
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"{exc.name} is not installed: install the mcp extra with pip install 'rlmx[mcp]'"
        ) from exc
    if max_sessions < 0 or not session_idle_s > 0:
        raise ConfigError("--max-sessions must be >= 0 and --session-idle-s > 0")
    if transport not in ("stdio", "http"):
        raise ConfigError(f"--transport must be stdio or http, not {transport!r}")
    if transport == "http" and not is_loopback(host):
        raise ConfigError(
            f"--transport http has no authentication here, so it binds loopback only, not {host}"
        )
    profiles = load_profiles(run, profiles_file=profiles_file, name=name)
    settings = McpSettings(
        profiles=profiles,
        roots=Roots.of(root),
        max_context_bytes=max_context_bytes,
        max_running=max_running,
        max_sessions=max_sessions,
        session_idle_s=session_idle_s,
        trace=not no_trace,
        trace_dir=prepare_trace_dir(trace_dir, "mcp"),
    )
    server = build_server(settings)
    if transport == "stdio":
        serve_stdio(server)
        return
    import uvicorn

    from rlmx.serve.server import bind

    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"rlmx mcp: streamable HTTP on http://{shown}:{sock.getsockname()[1]}/mcp (no auth)\n")
    sys.stderr.flush()
    app = server.streamable_http_app(host=host)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


WAITING = (
    "rlmx mcp: a stdio MCP server, waiting for an MCP client on stdin (Ctrl-C exits); register it with "
    "`claude mcp add rlmx -- rlmx mcp` or, in a client's JSON config, "
    '{"mcpServers": {"rlmx": {"command": "rlmx", "args": ["mcp"]}}} (add your flags after mcp)\n'
)


def _interrupted(signum: int, frame: Any) -> None:
    """Ctrl-C while serving stdio: the reader thread is blocked on stdin and would hold the exit until the
    next line, so leave at once, with the interrupted exit code."""
    sys.stderr.write("rlmx: interrupted\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def serve_stdio(server: Any) -> None:
    """Serve over stdin/stdout. In a terminal (no client there) one line on stderr says what this is and
    how to register it, and Ctrl-C leaves at once (no run can be in progress without a client); under a
    client (stdin a pipe) nothing is printed, since clients log stderr, and shutdown stays the SDK's."""
    if not sys.stdin.isatty():
        server.run("stdio")  # a client's: it ends the server by closing stdin (a clean shutdown)
        return
    sys.stderr.write(WAITING)
    sys.stderr.flush()
    previous = signal.signal(signal.SIGINT, _interrupted)
    try:
        server.run("stdio")
    finally:
        signal.signal(signal.SIGINT, previous)


def register(app: typer.Typer) -> None:
    app.command()(mcp)
