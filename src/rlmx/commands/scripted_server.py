"""`rlmx scripted-server --policy MODULE:FUNCTION | --replies FILE.jsonl [--port 0]`: the scripted
OpenAI/Anthropic-compatible test server (`rlmx.testing.ScriptedServer`) as a process of its own, to test
a pipeline from outside Python. It prints its OpenAI base URL (`http://127.0.0.1:PORT/v1`) as the first
line on stdout and serves until Ctrl-C or SIGTERM.

The replies file holds one reply per line, served in order, one per request: a JSON string (the reply's
text) or an object with `text` and optionally `input_tokens`, `output_tokens`, `cached_tokens`, `cost`
and `finish_reason` (the fields of `rlmx.testing.Reply`). Once they are used up, every further request
gets an HTTP 500 error saying so (`policy raised RuntimeError: the N replies in FILE are used up`). A policy is called as `FUNCTION(messages, request)` and returns the
reply's text or a `Reply` (see `rlmx.testing`)."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer


def register(app: typer.Typer) -> None:
    app.command(name="scripted-server")(scripted_server)


def read_replies(path: Path) -> list[Any]:
    """The replies file's lines as `Reply` objects (a ConfigError naming the line for a bad one)."""
    from rlmx.errors import ConfigError
    from rlmx.testing import Reply

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the replies file {path}: {exc}") from None
    replies = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
            reply = Reply(text=value) if isinstance(value, str) else Reply(**value)
            if not isinstance(reply.text, str):
                raise TypeError("`text` must be a string")
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{path} line {number}: not a reply (a JSON string, or an object with `text`): {exc}"
            ) from None
        replies.append(reply)
    if not replies:
        raise ConfigError(f"{path} holds no replies (one JSON string or object per line)")
    return replies


def replies_policy(replies: list[Any], path: Path) -> Any:
    """A policy answering with `replies` in order; once they are used up it raises, which the server
    answers with an HTTP 500 error carrying the message."""
    lock = threading.Lock()
    served = iter(replies)

    def policy(messages: list[dict[str, Any]], request: Any) -> Any:
        with lock:
            reply = next(served, None)
        if reply is None:
            raise RuntimeError(f"the {len(replies)} replies in {path} are used up")
        return reply

    return policy


def scripted_server(
    policy: Annotated[
        str | None,
        typer.Option(
            help="A policy function, MODULE:FUNCTION, called as FUNCTION(messages, request).", metavar="REF"
        ),
    ] = None,
    replies: Annotated[
        Path | None,
        typer.Option(
            help='A JSONL file of replies served in order (a JSON string or {"text": ...} a line).',
            metavar="FILE",
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="The port to listen on (0: any free one).", min=0, max=65535)] = 0,
) -> None:
    """Serve scripted model replies on 127.0.0.1 (the OpenAI and Anthropic APIs) for testing a pipeline;
    prints the OpenAI base URL, then serves until Ctrl-C or SIGTERM."""
    from rlmx.errors import ConfigError
    from rlmx.spec.data import resolve_reference
    from rlmx.testing import ScriptedServer

    if (policy is None) == (replies is None):
        raise ConfigError("pass exactly one of --policy MODULE:FUNCTION and --replies FILE.jsonl")
    if policy is not None:
        if str(Path.cwd()) not in sys.path and "" not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # a policy module beside the caller, as `python -m` finds it
        function = resolve_reference(policy, "--policy")
        if not callable(function):
            raise ConfigError(f"--policy: {policy} is not a function")
        server = ScriptedServer(function, port=port)
    else:
        assert replies is not None
        server = ScriptedServer(replies_policy(read_replies(replies), replies), port=port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
    except OSError as exc:
        raise ConfigError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    try:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"[rlmx] scripted server at {server.url}; Ctrl-C to stop\n")
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
