"""The REPL's side of the user's tools: a stub per host function, with the function's name, signature
and docstring, whose calls go to the host; and the signature's text, shared with the host's prompt.

A tool is described by a plain JSON spec the host sends in INIT's settings (`rlmx.tools` builds it):
`{"name", "doc", "params": [{"name", "kind", "annotation"?, "default"?}], "returns"?}` where `kind` is
an `inspect.Parameter` kind's name and `annotation` / `default` are texts (the default's repr). The stub
checks the arguments against that signature before anything crosses the wire; the host then checks
them again (the REPL is not trusted) and applies the real defaults.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

KINDS = {
    kind.name: kind
    for kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    )
}

# sent as a tool's params when its signature cannot be read (some built-ins): anything is accepted
ANY_ARGS = [{"name": "args", "kind": "VAR_POSITIONAL"}, {"name": "kwargs", "kind": "VAR_KEYWORD"}]


class ToolError(RuntimeError):
    """Raised in the REPL when a tool call failed: the tool raised, its result could not be sent back,
    it ran past its time, or the host refused the call. The message says which."""


class _Text(str):
    """An annotation or default shown as written (`inspect` prints a non-type annotation by its repr)."""

    def __repr__(self) -> str:
        return str(self)


def signature_of(spec: dict[str, Any]) -> inspect.Signature:
    params = []
    for item in spec.get("params") or []:
        kind = KINDS.get(str(item.get("kind")), inspect.Parameter.POSITIONAL_OR_KEYWORD)
        default = _Text(item["default"]) if "default" in item else inspect.Parameter.empty
        annotation = _Text(item["annotation"]) if item.get("annotation") else inspect.Parameter.empty
        params.append(inspect.Parameter(str(item["name"]), kind, default=default, annotation=annotation))
    returns = _Text(spec["returns"]) if spec.get("returns") else inspect.Signature.empty
    return inspect.Signature(params, return_annotation=returns)


def signature_text(spec: dict[str, Any]) -> str:
    """`name(a: int, b: str = 'x') -> dict`, as the model is told and as `help(name)` shows it."""
    return f"{spec['name']}{signature_of(spec)}"


def repl_tools(
    specs: list[dict[str, Any]],
    values: dict[str, Any],
    max_bytes: int,
    send: Callable[[dict[str, Any]], Any],
) -> dict[str, Any]:
    """The names the user's tools add to the REPL (from INIT's settings): a stub per host function
    (with `ToolError`, what a failed call raises), and a copy of each plain value (its own, even in the
    local backend, where the host's object is at hand). A value without a JSON form can only have come
    in-process (`rlmx.compat.rlms` with `isolated: False`): it is the object itself."""
    names: dict[str, Any] = {str(spec["name"]): make_stub(spec, send, max_bytes) for spec in specs}
    if names:
        names["ToolError"] = ToolError
    for name, value in values.items():
        try:
            names[name] = json.loads(json.dumps(value))
        except (TypeError, ValueError):
            names[name] = value
    return names


def make_stub(spec: dict[str, Any], send: Callable[[dict[str, Any]], Any], max_bytes: int) -> Any:
    """A function standing for the host's tool: same name, signature and docstring. A call is checked
    here -- against the signature (a TypeError naming the tool), then as JSON under `max_bytes` -- and
    then `send({"name", "args", "kwargs"})` asks the host and returns its result. The host checks again."""
    name = str(spec["name"])
    signature = signature_of(spec)

    def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{name}(): {exc}; its signature is {name}{signature}") from None
        params = {"name": name, "args": list(args), "kwargs": kwargs}
        try:
            size = len(json.dumps(params, ensure_ascii=False, allow_nan=False).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name}: its arguments must be JSON values (str, int, float, bool, None, lists and dicts "
                f"of them): {exc}"
            ) from None
        if size > max_bytes:
            raise ValueError(f"{name}: the arguments are {size:,} bytes as JSON; the limit is {max_bytes:,}")
        return send(params)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = spec.get("doc") or f"{name}: a tool that runs on the host."
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__module__ = "rlmx.tools"
    return tool
