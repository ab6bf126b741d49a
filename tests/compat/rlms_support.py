"""Helpers of the `rlmx.compat.rlms` tests: an official-style RLM pointed at a ScriptedServer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlmx.compat.rlms import RLM
from rlmx.testing import ScriptedServer

KEY = "sk-test-fake"


def repl(code: str) -> str:
    return f"```repl\n{code}\n```"


def ready(value: str) -> str:
    """A block that answers with the Python expression `value`."""
    return repl(f'answer["content"] = {value}\nanswer["ready"] = True')


def kwargs_for(srv: ScriptedServer, model: str = "gpt-test") -> dict[str, Any]:
    return {"model_name": model, "base_url": srv.url, "api_key": KEY}


@contextmanager
def compat(policy: Any, **options: Any) -> Iterator[tuple[RLM, ScriptedServer]]:
    """An RLM (backend openai) on a server answering with `policy`; `options` are RLM parameters."""
    with ScriptedServer(policy) as srv:
        rlm = RLM(backend="openai", backend_kwargs=kwargs_for(srv), **options)
        try:
            yield rlm, srv
        finally:
            rlm.close()


def roots(srv: ScriptedServer) -> list[Any]:
    """The root's requests (its turns and its final call), in order."""
    return [r for r in srv.requests if r.purpose in ("root", "final") and r.depth == 0]


def shape(request: Any) -> list[tuple[str, str]]:
    """Each message of a request as (role, first line)."""
    return [(m["role"], (m["content"].splitlines() or [""])[0]) for m in request.messages]
