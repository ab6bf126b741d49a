"""Your own tools in the model's REPL: `RLM(..., tools={...}, sub_tools={...})`.

An entry is a callable, a plain (JSON) value, the official repository's form `{"tool": obj,
"description": "..."}`, or a `Tool(obj, description=..., name=...)`. A callable runs on the host, never
in the sandbox: the REPL holds a stub with its name and signature whose calls cross the RPC bridge
(`rlmx.engine.tools` runs them). A plain value is copied into the REPL once. Names are checked here, at
construction: a name the REPL already gives (`context`, `llm_query`, `FINAL`, ...) is refused.

See docs/tools.md.
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlmx.errors import ConfigError
from rlmx.repl.tools import ANY_ARGS, signature_text

TOOL_TIMEOUT_S = 30.0  # a call's time on the host, unless the tool or the RLM says otherwise
TOOL_MAX_BYTES = 1_000_000  # a call's arguments, and its result, as JSON
# names the REPL gives besides its reserved ones (rlmx.repl.namespace); a tool may not take them either
ALSO_TAKEN = frozenset({"answer", "ctx", "ToolError"})


@dataclass(frozen=True)
class Tool:
    """One tool: a callable (run on the host) or a plain JSON value (copied into the REPL).
    `description` defaults to the first line of the callable's docstring; `name` to its `__name__`
    (a key of the `tools` dict names it too); `timeout_s` overrides the run's per-call timeout."""

    fn: Any
    description: str | None = None
    name: str | None = None
    timeout_s: float | None = None

    @property
    def is_function(self) -> bool:
        return callable(self.fn)

    @property
    def is_async(self) -> bool:
        fn = self.fn
        call = None if inspect.isroutine(fn) else type(fn).__dict__.get("__call__")  # an object's method
        return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))

    def summary(self) -> str:
        if self.description:
            return " ".join(self.description.split())
        if not self.is_function:
            return ""
        doc = inspect.getdoc(self.fn) or ""
        return doc.strip().splitlines()[0].strip() if doc.strip() else ""

    def spec(self, name: str) -> dict[str, Any]:
        """What the REPL is sent to make the stub (see rlmx.repl.tools)."""
        spec: dict[str, Any] = {"name": name, "doc": inspect.getdoc(self.fn) or self.summary()}
        try:
            signature = inspect.signature(self.fn)
        except (TypeError, ValueError):  # some built-ins have none: any arguments are accepted
            spec["params"] = ANY_ARGS
            return spec
        spec["params"] = [param_spec(p) for p in signature.parameters.values()]
        if signature.return_annotation is not inspect.Signature.empty:
            spec["returns"] = annotation_text(signature.return_annotation)
        return spec


def param_spec(param: inspect.Parameter) -> dict[str, Any]:
    item: dict[str, Any] = {"name": param.name, "kind": param.kind.name}
    if param.annotation is not inspect.Parameter.empty:
        item["annotation"] = annotation_text(param.annotation)
    if param.default is not inspect.Parameter.empty:
        item["default"] = repr(param.default)
    return item


def annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def check_name(name: Any) -> str:
    from rlmx.repl.namespace import NUMBERED, RESERVED  # only when there are tools: its imports cost ~8 ms

    taken = RESERVED | ALSO_TAKEN
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ConfigError(f"tool name {name!r} is not a Python identifier; the REPL could not call it")
    if name in taken or NUMBERED.fullmatch(name):
        raise ConfigError(
            f"tool name {name!r} is taken: the REPL already gives that name ({', '.join(sorted(taken))}, "
            "context_N and history_N are reserved); rename the tool"
        )
    if name.startswith("__"):
        raise ConfigError(f"tool name {name!r}: names starting with '__' are the REPL's own")
    return name


def as_tool(entry: Any, key: str | None = None) -> tuple[str, Tool]:
    """(name, Tool) of one entry of `tools`."""
    if isinstance(entry, Tool):
        tool = entry
    elif isinstance(entry, Mapping) and "tool" in entry and set(entry) <= {"tool", "description"}:
        tool = Tool(entry["tool"], description=entry.get("description"))  # the official form
    else:
        tool = Tool(entry)
    name = tool.name or key or (getattr(tool.fn, "__name__", None) if tool.is_function else None)
    if name is None:
        raise ConfigError(f"a tool given in a list needs a name: {entry!r} (use Tool(value, name=...))")
    name = check_name(name)
    if tool.timeout_s is not None and not tool.timeout_s > 0:
        raise ConfigError(f"tool {name!r}: timeout_s must be > 0")
    if not tool.is_function:
        try:
            json.dumps(tool.fn, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"tool {name!r} is neither callable nor a JSON value ({exc}); the REPL gets a copy of a "
                "value, so it must be JSON (str, int, float, bool, None, lists and dicts of them)"
            ) from exc
    return name, tool


@dataclass(frozen=True)
class ToolSet:
    """The tools of one REPL, by name, checked."""

    tools: dict[str, Tool] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: Any) -> ToolSet:
        """From a dict (name -> entry), a list of callables / `Tool`s, a ToolSet, or None."""
        if spec is None:
            return cls()
        if isinstance(spec, ToolSet):
            return spec
        items: Iterable[tuple[str | None, Any]]
        if isinstance(spec, Mapping):
            items = spec.items()
        elif isinstance(spec, (list, tuple)):
            items = ((None, entry) for entry in spec)
        elif isinstance(spec, Tool) or callable(spec):
            items = [(None, spec)]
        else:
            raise ConfigError(
                f"tools must be a dict, a list of callables or a Tool, not {type(spec).__name__}"
            )
        tools: dict[str, Tool] = {}
        for key, entry in items:
            if key is not None and not isinstance(key, str):
                raise ConfigError(f"tool names must be strings, not {key!r}")
            name, tool = as_tool(entry, key)
            if name in tools:
                raise ConfigError(f"two tools are named {name!r}")
            tools[name] = tool
        return cls(tools)

    def __bool__(self) -> bool:
        return bool(self.tools)

    def merged(self, other: ToolSet) -> ToolSet:
        clash = set(self.tools) & set(other.tools)
        if clash:
            raise ConfigError(f"two tools are named {sorted(clash)[0]!r}")
        return ToolSet({**self.tools, **other.tools})

    def functions(self) -> dict[str, Tool]:
        return {name: tool for name, tool in self.tools.items() if tool.is_function}

    def values(self) -> dict[str, Any]:
        return {name: tool.fn for name, tool in self.tools.items() if not tool.is_function}

    def repl_options(self, max_bytes: int) -> dict[str, Any]:
        """What the REPL is sent of the tools, in its `ReplOptions` (nothing when there are no tools)."""
        if not self.tools:
            return {}
        return {
            "tools": [tool.spec(name) for name, tool in self.functions().items()],
            "tool_values": self.values(),
            "tool_max_bytes": max_bytes,
        }

    def prompt(self, max_bytes: int) -> str:
        """The system prompt's section naming each tool, its signature and what it does."""
        if not self.tools:
            return ""
        lines = [
            "## Tools",
            "",
            "Your REPL also has these names, given by the user:",
        ]
        for name, tool in self.tools.items():
            summary = tool.summary()
            if tool.is_function:
                line = f"- `{signature_text(tool.spec(name))}`"
            else:
                line = f"- `{name}`: a {type(tool.fn).__name__} value"
            lines.append(line + (f": {summary}" if summary else ""))
        if self.functions():
            lines += [
                "",
                "The functions run outside your REPL, one call at a time: their arguments and results must be "
                f"JSON values (at most {max_bytes:,} bytes each way). A failed call raises ToolError in your "
                "code with the reason.",
            ]
        return "\n".join(lines)


@dataclass(frozen=True)
class RunTools:
    """A run's tools: `root`'s for the root REPL, `sub`'s for every child's; the per-call timeout and
    the size cap of a call's arguments and of its result."""

    root: ToolSet = field(default_factory=ToolSet)
    sub: ToolSet = field(default_factory=ToolSet)
    timeout_s: float = TOOL_TIMEOUT_S
    max_bytes: int = TOOL_MAX_BYTES
    mcp: ToolSet = field(default_factory=ToolSet)  # the run's MCP servers' functions, in every REPL
    mcp_prompt: str = ""  # their section of the system prompt (rlmx.mcp.tools)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ConfigError(f"tool_timeout_s must be > 0, not {self.timeout_s!r}")
        if not self.max_bytes > 0:
            raise ConfigError(f"tool_max_bytes must be > 0, not {self.max_bytes!r}")

    @classmethod
    def of(cls, tools: Any, sub_tools: Any, *, timeout_s: float, max_bytes: int) -> RunTools:
        """Checked (ConfigError): children share `tools` unless `sub_tools` is given."""
        root = ToolSet.of(tools)
        sub = root if sub_tools is None else ToolSet.of(sub_tools)
        return cls(root, sub, timeout_s=timeout_s, max_bytes=max_bytes)

    def at(self, depth: int) -> ToolSet:
        own = self.root if depth == 0 else self.sub
        return own.merged(self.mcp) if self.mcp else own

    def repl_options(self, depth: int) -> dict[str, Any]:
        return self.at(depth).repl_options(self.max_bytes)

    def prompt(self, depth: int) -> str:
        own = (self.root if depth == 0 else self.sub).prompt(self.max_bytes)
        return "\n\n".join(part for part in (own, self.mcp_prompt) if part)


def load_tools(spec: str) -> ToolSet:
    """`MODULE:ATTR` (the CLI's --tools): the attribute, a dict or a list of callables, importable here."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"`tools` {spec!r}: give MODULE:ATTR, e.g. mytools:TOOLS")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"`tools` {spec!r}: cannot import {module_name!r} ({exc}); it must be importable where the run "
            "executes (on PYTHONPATH)"
        ) from exc
    try:
        value: Any = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"`tools` {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    return ToolSet.of(value)


def load_all(specs: Iterable[str]) -> ToolSet:
    """Every --tools given, merged (a name given twice is refused)."""
    found = ToolSet()
    for spec in specs:
        found = found.merged(load_tools(spec))
    return found


def load_configured(
    specs: Iterable[str], sub_specs: Iterable[str] | None = None, extra: Iterable[str] = ()
) -> tuple[ToolSet | None, ToolSet | None]:
    """(tools, sub_tools) for an RLM from configuration: `specs` (a config file's or a profile's
    `tools`) plus `extra` (the command line's --tools) for the root, and for children too unless
    `sub_specs` (`sub_tools`) is given. None for none given; every module is imported here, on the host,
    so a bad one is refused before any model call."""
    root = load_all([*specs, *extra])
    sub = None if sub_specs is None else load_all(sub_specs)
    return (root or None), sub
