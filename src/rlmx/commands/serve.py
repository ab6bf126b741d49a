"""`rlmx serve`: an OpenAI-compatible endpoint where every chat completion is an RLM run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rlmx.commands import options as opt
from rlmx.commands.profiles import load_profiles
from rlmx.commands.run_options import SERVED_LAYOUT, with_run_options
from rlmx.errors import ConfigError


def missing_extra(exc: ModuleNotFoundError, extra: str) -> ConfigError:
    return ConfigError(
        f"{exc.name} is not installed: install the {extra} extra with pip install 'rlmx[{extra}]'"
    )


@with_run_options(layout=SERVED_LAYOUT)
def serve(
    name: Annotated[
        str | None, typer.Option(help="Profile name; served as rlmx/NAME (default: the model's name).")
    ] = None,
    profiles_file: opt.ProfilesFile = None,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="Port, 1-65535 (0: any free port; the URL is printed)."),
    ] = 8000,
    token: Annotated[
        str | None, typer.Option(help="Bearer token callers must send (default: $RLMX_SERVE_TOKEN).")
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="No token at all; only allowed on a loopback bind.")
    ] = False,
    root: Annotated[
        list[Path], typer.Option("--root", help="A folder callers may name files in; repeatable.")
    ] = [],  # noqa: B006
    max_running: Annotated[int, typer.Option(help="Runs at once; more wait in the queue.")] = 2,
    max_queued: Annotated[int, typer.Option(help="Runs that may wait; beyond that: HTTP 429.")] = 8,
    max_sessions: opt.MaxSessions = 16,
    session_idle_s: opt.SessionIdleS = 600.0,
    max_request_bytes: Annotated[int, typer.Option(help="Largest request body (HTTP 413 beyond).")] = 32
    * 2**20,
    max_context_bytes: opt.MaxContextBytes = 512 * 2**20,
    context_threshold: Annotated[
        int, typer.Option(help="Message text parts longer than this many characters become context.")
    ] = 8_000,
    image_url_host: Annotated[
        list[str],
        typer.Option(
            "--image-url-host",
            help="A host whose https image URLs requests may name (public addresses only); repeatable. "
            "Without one, image parts must be data URLs.",
        ),
    ] = [],  # noqa: B006
    no_trace: opt.NoTrace = False,
    trace_dir: Annotated[
        Path | None,
        typer.Option(help="Folder for the runs' traces (default: $XDG_STATE_HOME/rlmx/serve-traces)."),
    ] = None,
    **run: Any,
) -> None:
    """Serve POST /v1/chat/completions and GET /v1/models; each completion is an RLM run.

    The profiles served are those of --profiles; without it and without --model, the config file's; else
    one profile made of --model (default: the model `rlmx ask` would use), --sub-model, --base-url, --name,
    the sampling options, the prompt options and the limits; --tools adds tools to every profile."""
    from rlmx.serve.roots import Roots
    from rlmx.serve.settings import ServeSettings, own_trace_dir, prepare_trace_dir, resolve_token

    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        from rlmx.serve.server import run_server
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "serve") from exc
    auth_token = resolve_token(token, no_auth=no_auth, host=host)
    profiles = load_profiles(run, profiles_file=profiles_file, name=name)
    settings = ServeSettings(
        profiles=profiles,
        roots=Roots.of(root),
        token=auth_token,
        max_request_bytes=max_request_bytes,
        max_context_bytes=max_context_bytes,
        context_threshold=context_threshold,
        image_url_hosts=tuple(image_url_host),
        max_running=max_running,
        max_queued=max_queued,
        max_sessions=max_sessions,
        session_idle_s=session_idle_s,
        trace=not no_trace,
        trace_dir=own_trace_dir("serve") if no_trace else prepare_trace_dir(trace_dir, "serve"),
    )
    # the server's log: a line per request (info) unless --log-level or -vv says otherwise
    level = run["log_level"] or ("debug" if run["verbose"] >= 2 else "info")
    run_server(settings, host=host, port=port, log_level=level)


def register(app: typer.Typer) -> None:
    app.command()(serve)
