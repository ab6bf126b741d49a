"""MCP tools as REPL functions: the naming rule, the stub's signature from the input schema, argument
validation (jsonschema) and result conversion. Every function here runs on the host.

Naming rule (docs/mcp-servers.md): in a server's name, a tool's name and a parameter's name, every
character that is not an ASCII letter, digit or `_` becomes `_`; a name starting with a digit gets a `_`
in front; a Python keyword gets a `_` after it. A tool's function is `<server>_<tool>`. Two tools that
become one name, or a name the REPL already has, get no function (said in one line): `mcp_call` still
reaches them by their original names.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmx.engine.tools import ToolFailed
from rlmx.errors import ConfigError
from rlmx.tools import Tool, ToolSet, check_name

PROMPT_TOOLS = 40  # tools listed by name in the system prompt; mcp_tools() lists them all
SUMMARY_CHARS = 160
JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}
OTHER = re.compile(r"[^A-Za-z0-9_]")


def identifier(name: str) -> str:
    """`name` made into a Python identifier by the documented rule."""
    text = OTHER.sub("_", name) or "_"
    if text[0].isdigit():
        text = "_" + text
    if keyword.iskeyword(text):
        text += "_"
    return text


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool of an MCP server, as a REPL function (or `mcp_call` / `mcp_tools`)."""

    server: str = ""
    tool: str = ""

    def trace_fields(self, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.server:
            return {"server": self.server, "mcp_tool": self.tool}
        if self.tool == "mcp_call":  # the server and the tool are its first arguments
            named = [*args[:2], None, None]
            return {"server": str(named[0]), "mcp_tool": str(named[1])}
        return {}


def summary(text: str | None) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 3] + "..."


def annotation(schema: Any) -> str | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        names = [JSON_TYPES.get(k, "None" if k == "null" else "Any") for k in kind]
        return " | ".join(dict.fromkeys(names))
    return JSON_TYPES.get(kind) if isinstance(kind, str) else None


def parameters(schema: Any) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """The stub's parameters (required first, in the schema's order) and identifier -> original name.
    Raises ValueError naming two properties that become one identifier."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    required = [r for r in (schema.get("required") or []) if r in props] if isinstance(schema, dict) else []
    order = [*required, *(p for p in props if p not in required)]
    params: list[inspect.Parameter] = []
    names: dict[str, str] = {}
    for prop in order:
        ident = identifier(str(prop))
        if ident in names:
            raise ValueError(f"its parameters {names[ident]!r} and {prop!r} both become {ident!r}")
        names[ident] = str(prop)
        sub = props[prop] if isinstance(props[prop], dict) else {}
        default: Any = inspect.Parameter.empty
        if prop not in required:
            default = sub.get("default")
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        ann = annotation(sub)
        params.append(
            inspect.Parameter(ident, kind, default=default, annotation=ann or inspect.Parameter.empty)
        )
    return params, names


def doc_of(tool: Any, names: dict[str, str], schema: Any) -> str:
    lines = [(tool.description or "").strip() or f"The MCP tool {tool.name!r}."]
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    for ident, prop in names.items():
        sub = props.get(prop) if isinstance(props, dict) else None
        described = summary(sub.get("description")) if isinstance(sub, dict) else ""
        lines.append(
            f"  {ident}" + (f" ({prop!r})" if ident != prop else "") + (f": {described}" if described else "")
        )
    return "\n".join(lines)


def result_value(result: Any, server: str, tool: str, output_schema: Any = None) -> Any:
    """A `CallToolResult` as a Python value: structured content as data (`{"result": x}` as `x` when the
    tool's output schema has that one property, as SDK servers wrap a plain return value); else one text
    as `str` (several blocks as a list); images, audio and resources as a one-line description.
    `isError`: ToolFailed with the server's text."""
    blocks = [block_value(b) for b in result.content or []]
    if getattr(result, "is_error", False):
        text = " ".join(str(b) for b in blocks) or "no message"
        raise ToolFailed(f"MCP tool {tool!r} of server {server!r} failed: {text}")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        props = output_schema.get("properties") if isinstance(output_schema, dict) else None
        wrapped = isinstance(props, dict) and list(props) == ["result"]
        if wrapped and isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"]
        return structured
    if not blocks:
        return None
    return blocks[0] if len(blocks) == 1 else blocks


def block_value(block: Any) -> Any:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind} {getattr(block, 'mime_type', '?')}, about {size:,} bytes: not shown in the REPL]"
    if kind == "resource_link":
        return (
            f"[resource link {block.uri}" + (f" ({block.name})" if getattr(block, "name", None) else "") + "]"
        )
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if text is not None:
            return text
        size = len(getattr(res, "blob", "") or "") * 3 // 4
        return f"[resource {res.uri} ({getattr(res, 'mime_type', None) or 'binary'}), about {size:,} bytes: not shown]"
    return f"[{kind or type(block).__name__} content: not shown]"


def validator(schema: Any) -> Callable[[dict[str, Any]], str | None]:
    """A check of arguments against the tool's input schema: None, or the first error in one line."""
    import jsonschema

    if not isinstance(schema, dict):
        return lambda _: None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        checker = cls(schema)
    except jsonschema.exceptions.SchemaError:
        return lambda _: None  # the server's schema is broken: the server judges the arguments

    def check(arguments: dict[str, Any]) -> str | None:
        error = jsonschema.exceptions.best_match(checker.iter_errors(arguments))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return (f"`{where}`: " if where else "") + error.message

    return check


def make_tool(hub: Any, server: Any, tool: Any, fn_name: str) -> McpTool:
    """The REPL function `fn_name` of one MCP tool (raises ValueError when its parameters clash)."""
    schema = tool.input_schema if isinstance(getattr(tool, "input_schema", None), dict) else {}
    params, names = parameters(schema)
    required = set(schema.get("required") or [])
    check = validator(schema)
    signature = inspect.Signature(params)

    async def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        arguments = {
            names[k]: v for k, v in bound.arguments.items() if not (v is None and names[k] not in required)
        }
        problem = check(arguments)
        if problem:
            raise ToolFailed(f"{fn_name}: the arguments do not match the tool's input schema: {problem}")
        result = await hub_call(hub, server.name, tool.name, arguments)
        return result_value(result, server.name, tool.name, tool.output_schema)

    call.__name__ = call.__qualname__ = fn_name
    call.__doc__ = doc_of(tool, names, schema)
    call.__signature__ = signature  # type: ignore[attr-defined]
    return McpTool(
        call,
        description=summary(tool.description),
        name=fn_name,
        timeout_s=server.timeout_s,
        server=server.name,
        tool=tool.name,
    )


async def hub_call(hub: Any, server: str, tool: str, arguments: dict[str, Any]) -> Any:
    from rlmx.mcp.client import McpUnavailable
    from rlmx.mcp.sampling import sampler_here

    conn = hub.connections.get(server)
    sampler = sampler_here() if conn is not None and conn.server.sampling else None
    try:
        return await hub.call(server, tool, arguments, sampler)
    except McpUnavailable as exc:
        raise ToolFailed(str(exc)) from None


def listing(hub: Any) -> list[dict[str, Any]]:
    """What `mcp_tools()` returns: one dict per tool of every running server."""
    rows = []
    for name in hub.running():
        server = hub.connections[name].server
        for tool in hub.tools_of(name):
            if not server.allows(tool.name):
                continue
            rows.append(
                {
                    "server": name,
                    "tool": tool.name,
                    "function": hub.functions.get((name, tool.name)),
                    "description": summary(tool.description),
                    "parameters": (tool.input_schema or {}).get("properties", {}),
                    "required": (tool.input_schema or {}).get("required", []),
                }
            )
    return rows


def generic_tools(hub: Any, timeout_s: float | None) -> dict[str, McpTool]:
    """`mcp_call(server, tool, **arguments)` and `mcp_tools(server=None)`."""

    async def mcp_call(server: str, tool: str, /, **arguments: Any) -> Any:
        """Call MCP tool `tool` of `server` by their original names with its original parameter names."""
        conn = hub.connections.get(server)
        if conn is None:
            raise ToolFailed(f"there is no MCP server named {server!r}; mcp_tools() lists them")
        if not conn.server.allows(tool):
            raise ToolFailed(f"MCP tool {tool!r} of server {server!r} is not allowed by its `allow`/`deny`")
        found = next((t for t in hub.tools_of(server) if t.name == tool), None)
        if found is None:
            if conn.dead is not None:
                raise ToolFailed(f"MCP server {server!r} is not running: {conn.dead}")
            raise ToolFailed(f"MCP server {server!r} has no tool {tool!r}; mcp_tools({server!r}) lists them")
        problem = validator(found.input_schema)(arguments)
        if problem:
            raise ToolFailed(
                f"mcp_call({server!r}, {tool!r}): the arguments do not match the input schema: {problem}"
            )
        result = await hub_call(hub, server, tool, arguments)
        return result_value(result, server, tool, found.output_schema)

    async def mcp_tools(server: str | None = None) -> list[dict[str, Any]]:
        """The MCP tools of this REPL (of `server`, if given): server, tool, function, description, parameters."""
        rows = listing(hub)
        return [r for r in rows if server is None or r["server"] == server]

    return {
        "mcp_call": McpTool(mcp_call, name="mcp_call", timeout_s=timeout_s, tool="mcp_call"),
        "mcp_tools": McpTool(mcp_tools, name="mcp_tools"),
    }


def build_toolset(hub: Any, taken: set[str], say: Callable[[str], None]) -> tuple[ToolSet, str]:
    """The REPL functions of every running server's allowed tools, and the prompt's MCP section."""
    own = sorted({"mcp_call", "mcp_tools"} & taken)
    if own:
        raise ConfigError(f"tool name {own[0]!r} is the MCP client's (with mcp_servers); rename your tool")
    taken = taken | {"mcp_call", "mcp_tools"}
    reported: set[str] = set()
    tools: dict[str, Tool] = {}
    hub.functions = {}
    clashes: dict[str, list[str]] = {}
    candidates: list[tuple[str, Any, Any]] = []
    for name in hub.running():
        server = hub.connections[name].server
        for tool in hub.tools_of(name):
            if server.allows(tool.name):
                fn_name = f"{identifier(name)}_{identifier(tool.name)}"
                clashes.setdefault(fn_name, []).append(f"{name}/{tool.name}")
                candidates.append((fn_name, server, tool))
    for fn_name, server, tool in candidates:
        where = f"MCP server {server.name!r}"
        if len(clashes[fn_name]) > 1:
            if fn_name in reported:
                continue
            reported.add(fn_name)
            say(
                f"{where}: {', '.join(clashes[fn_name])} all become {fn_name!r}; none gets a function (use mcp_call)"
            )
            continue
        try:
            check_name(fn_name)
            if fn_name in taken:
                raise ValueError(f"{fn_name!r} is already a tool's name")
            tools[fn_name] = make_tool(hub, server, tool, fn_name)
        except Exception as exc:  # a ConfigError of check_name, a ValueError of the parameters
            say(f"{where}: its tool {tool.name!r} gets no function ({exc}); use mcp_call")
            continue
        hub.functions[(server.name, tool.name)] = fn_name
    generic = generic_tools(hub, None)
    if not hub.running():
        return ToolSet({}), ""
    return ToolSet({**tools, **generic}), prompt_section(hub, tools)


def prompt_section(hub: Any, tools: dict[str, Tool]) -> str:
    """The system prompt's MCP section (prompts/mcp_tools.md): up to PROMPT_TOOLS functions, then how
    many more `mcp_tools()` lists."""
    from rlmx.prompts import fill, load
    from rlmx.repl.tools import signature_text

    lines = []
    for fn_name, tool in list(tools.items())[:PROMPT_TOOLS]:
        summ = tool.summary()
        lines.append(f"- `{signature_text(tool.spec(fn_name))}`" + (f": {summ}" if summ else ""))
    rest = len(tools) - PROMPT_TOOLS
    if rest > 0:
        lines.append(
            f"- ... and {rest} more: `mcp_tools()` lists them all (server, tool, function, parameters)"
        )
    if not lines:
        lines.append("- (none as functions: use `mcp_call`)")
    return fill(load("mcp_tools.md"), servers=", ".join(hub.running()), functions="\n".join(lines)).strip()
