"""A bare REPL: a worker's namespace with none of rlmx's names, owned by its caller (DSPy's interpreter,
`rlmx.integrations.dspy`).

The host fills it with three frames (`rlmx.sandbox.frames`): DEFINE gives it the host functions (a stub
each, whose calls cross the RPC bridge as `tool` requests, every argument by keyword where the
signature allows it) and a `SUBMIT` with the caller's output fields; ASSIGN binds a value to a name;
EXEC runs a cell. A cell ends in one of three ways, reported as the cell's `final`: `submit` (SUBMIT's
fields), `value` (the value of a trailing expression that is not None) or `raised` (the error its code
raised, by type, message and arguments). Values cross as JSON, else as their repr. Standard library
only: the worker imports it when a bare REPL starts.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import keyword
from collections.abc import Callable
from typing import Any

from rlmx.repl import syntax
from rlmx.repl.tools import ToolError, signature_of
from rlmx.sandbox.capture import short_traceback

CELL = "<cell>"
BY_POSITION = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)


class Submitted(BaseException):
    """Raised by SUBMIT: the cell ends here, with these fields."""

    def __init__(self, fields: dict[str, Any]) -> None:
        super().__init__(fields)
        self.fields = fields


def plain(value: Any) -> dict[str, Any]:
    """A value as a frame carries it: {"json": value} when it is strict JSON, else {"text": repr}."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return {"text": _repr(value)}
    return {"json": value}


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a repr of the code's own that raises
        return f"<{type(value).__name__} object: repr raised {type(exc).__name__}>"


def _field(value: Any) -> Any:
    """One SUBMIT field: itself when it is JSON, else its repr (DSPy parses text into the field's type)."""
    return value if "json" in plain(value) else _repr(value)


def _identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def make_submit(outputs: list[dict[str, Any]] | None) -> Callable[..., None]:
    """SUBMIT with the output fields as its parameters (SUBMIT(output) without fields): a real function,
    so a wrong call fails as Python says it ("missing 1 required positional argument: 'score'")."""
    names = [str(item.get("name")) for item in outputs] if outputs else ["output"]
    if not all(_identifier(n) for n in names) or len(set(names)) != len(names):
        raise ValueError(f"SUBMIT's fields must be distinct Python identifiers, not {names}")
    fields = ", ".join(f"{n!r}: {n}" for n in names)
    source = f"def SUBMIT({', '.join(names)}):\n    raise _Submitted({{{fields}}})\n"
    scope: dict[str, Any] = {"_Submitted": Submitted}
    exec(compile(source, "<SUBMIT>", "exec"), scope)
    submit: Callable[..., None] = scope["SUBMIT"]
    submit.__doc__ = f"Submit the final output: SUBMIT({', '.join(names)}); ends the cell."
    return submit


def make_stub(spec: dict[str, Any], send: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    """A host function's stand-in: its name, signature and docstring. A call is bound to the signature
    here (a TypeError naming the function, nothing sent), then sent with every argument by keyword unless
    the signature takes some by position only."""
    name = str(spec["name"])
    signature = signature_of(spec)
    positional = any(p.kind in BY_POSITION for p in signature.parameters.values())

    def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{name}(): {exc}; its signature is {name}{signature}") from None
        if positional:
            call_args, call_kwargs = list(bound.args), dict(bound.kwargs)
        else:
            call_args, call_kwargs = [], {}
            for key, value in bound.arguments.items():
                if signature.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
                    call_kwargs.update(value)
                else:
                    call_kwargs[key] = value
        params = {"name": name, "args": call_args, "kwargs": call_kwargs}
        try:
            json.dumps(params, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name}: its arguments must be JSON values (str, int, float, bool, None, lists and dicts "
                f"of them): {exc}"
            ) from None
        return send(params)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = spec.get("doc") or f"{name}: a function that runs on the host."
    tool.__signature__ = signature  # type: ignore[attr-defined]
    return tool


class BareRepl:
    """The namespace of a bare REPL, its host functions, and the values ASSIGN sent (to bind again)."""

    def __init__(self, send: Callable[[dict[str, Any]], Any]) -> None:
        self.send = send
        self.builtins = dict(vars(builtins))  # the cells' own copy, put back before every cell
        self.names: dict[str, Any] = {"__name__": "__main__", "__builtins__": dict(self.builtins)}
        self.given: dict[str, Any] = {}  # name -> the object DEFINE bound (a stub, SUBMIT)
        self.kept: dict[str, Any] = {}  # name -> the str ASSIGN sent last
        self.define([], None)

    def define(self, tools: list[dict[str, Any]], outputs: list[dict[str, Any]] | None) -> None:
        """The host functions and SUBMIT, replacing the last DEFINE's (a name the code rebound since is
        left to the code)."""
        given: dict[str, Any] = {str(spec["name"]): make_stub(spec, self.call) for spec in tools}
        if not all(_identifier(name) for name in given):
            raise ValueError(f"host function names must be Python identifiers, not {sorted(given)}")
        given["SUBMIT"] = make_submit(outputs)
        for name, old in self.given.items():
            if name not in given and self.names.get(name) is old:
                del self.names[name]
        self.names.update(given)
        self.given = given

    def take(self, frame: Any, load: Callable[[], Any]) -> str | None:
        """A DEFINE or ASSIGN frame (`load` decodes ASSIGN's value): None, or why it could not be."""
        try:
            if frame.TYPE == "define":
                self.define(frame.tools, frame.outputs)
                return None
            return self.assign(frame.name, None if frame.reuse else load(), frame.reuse)
        except (ValueError, TypeError, KeyError, SyntaxError) as exc:
            return str(exc)

    def call(self, params: dict[str, Any]) -> Any:
        try:
            return self.send(params)
        except RuntimeError as exc:  # the host's refusal or the function's error: a RuntimeError here
            raise ToolError(str(exc)) from None

    def assign(self, name: str, value: Any, reuse: bool) -> str | None:
        """Bind a value (or, with `reuse`, the value last sent under this name); None, or why not."""
        if not _identifier(name) or name == "__builtins__":
            return f"cannot assign {name!r}: not a Python identifier"
        if reuse:
            if name not in self.kept:
                return f"no value of {name!r} was kept to bind again"
            value = self.kept[name]
        elif isinstance(value, str):  # text is kept, to be bound again (the host sends a str once)
            self.kept[name] = value
        else:
            self.kept.pop(name, None)
        self.names[name] = value
        return None

    def restore(self) -> None:
        """Before a cell: the host functions, SUBMIT and the builtins as DEFINE gave them, whatever the
        code did to them (rebound, deleted, `__builtins__['len'] = None`)."""
        self.names.update(self.given)
        current = self.names.get("__builtins__")
        if not isinstance(current, dict):
            current = self.names["__builtins__"] = {}
        if current != self.builtins:
            current.clear()
            current.update(self.builtins)

    def run(self, code: str) -> dict[str, Any] | None:
        """Run a cell: its `final` ({kind: submit | value | raised, json | text}), or None (no value)."""
        self.restore()
        try:
            tree = syntax.parse(code, CELL, "exec")
        except (SyntaxError, ValueError) as exc:  # ValueError: source with null bytes
            return self.raised(exc, syntax=True)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        try:
            exec(syntax.compile_tree(tree, CELL, "exec"), self.names)
            if last is None:
                return None
            value = eval(syntax.compile_tree(ast.Expression(last.value), CELL, "eval"), self.names)
        except Submitted as submitted:
            return {"kind": "submit", "json": {k: _field(v) for k, v in submitted.fields.items()}}
        except BaseException as exc:  # the code's errors (SystemExit included) go back to the caller
            return self.raised(exc)
        return None if value is None else {"kind": "value", **plain(value)}

    @staticmethod
    def raised(exc: BaseException, *, syntax: bool = False) -> dict[str, Any]:
        try:
            message = str(exc)
        except Exception:
            message = ""
        args = [_field(a) for a in exc.args] if isinstance(exc.args, tuple) else []
        described = {
            "type": type(exc).__name__,
            "message": message,
            "args": args,
            "syntax": syntax,
            "traceback": short_traceback(exc),
        }
        return {"kind": "raised", "json": described}
