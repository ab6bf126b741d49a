"""MCP servers as an MCP client configures them: the `mcpServers` JSON of Claude Desktop, Cursor and
`.mcp.json`, read into `McpServer`s.

An entry is stdio (`command`, `args`, `env`, `cwd`) or streamable HTTP (`url`, `headers`; `"type":
"http"` or `"streamable-http"`); `"type": "sse"` is refused by name. `${VAR}` and `${VAR:-default}` are
expanded in `command`, `args`, `env`, `cwd`, `url` and `headers` (as Claude Code does), in the process
that starts the server, so a configuration crossing processes carries the references, not the secrets.
rlmx's own keys per entry: `allow` / `deny` (tool names), `timeout_s` (per call), `startup_timeout_s`.
See docs/mcp-servers.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError

STARTUP_TIMEOUT_S = 30.0  # to start, initialize and list the tools
# what a stdio server inherits of rlmx's environment, besides what its `env` names
INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LANGUAGE", "TZ")
STDIO_KEYS = {"command", "args", "env", "cwd"}
HTTP_KEYS = {"url", "headers"}
OWN_KEYS = {"type", "allow", "deny", "timeout_s", "startup_timeout_s", "disabled", "description", "sampling"}
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


def expand(text: str, where: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` / `${VAR:-default}` in `text`; an unset variable without a default is refused."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise ConfigError(
                    f"MCP server {where} uses ${{{name}}}, which is not set; set it or write ${{{name}:-default}}"
                )
            return default
        return value

    return VAR.sub(one, text)


def minimal_env(extra: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """A stdio server's whole environment: PATH, HOME, the locale and the like, then its own `env`."""
    env = {k: v for k, v in environ.items() if k in INHERITED or k.startswith("LC_")}
    return {**env, **extra}


@dataclass(frozen=True)
class McpServer:
    """One configured server. `env` and `headers` are already expanded: never logged or traced."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    timeout_s: float | None = None
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    sampling: bool = False  # answer its sampling/createMessage with the run's sub-model (rlmx.mcp.sampling)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def allows(self, tool: str) -> bool:
        return tool not in self.deny and (self.allow is None or tool in self.allow)

    def where(self) -> str:
        """The server as a message names it (no env, no headers)."""
        return f"{self.name!r} ({self.command})" if self.command else f"{self.name!r} ({self.url})"


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"MCP server {where} must be a list of strings")
    return tuple(value)


def _table(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"MCP server {where} must be an object of strings")
    return {str(k): v for k, v in value.items()}


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"MCP server {where} must be a number of seconds > 0")
    return float(value)


def parse_server(name: str, entry: Any, environ: Mapping[str, str]) -> McpServer | None:
    """One `mcpServers` entry (None when `"disabled": true`)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"MCP server {name!r} must be an object with `command` or `url`")
    unknown = sorted(set(entry) - STDIO_KEYS - HTTP_KEYS - OWN_KEYS)
    if unknown:
        raise ConfigError(f"MCP server {name!r}: unknown key {unknown[0]!r}")
    if entry.get("disabled") is True:
        return None
    kind = entry.get("type")
    if kind == "sse":
        raise ConfigError(
            f'MCP server {name!r}: the SSE transport (`"type": "sse"`) is not supported; use the server\'s '
            "streamable HTTP endpoint (`url`) or stdio (`command`)"
        )
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise ConfigError(f"MCP server {name!r} needs exactly one of `command` (stdio) and `url` (HTTP)")
    if kind not in (None, "stdio", "http", "streamable-http", "streamable_http"):
        raise ConfigError(f"MCP server {name!r}: unknown `type` {kind!r} (stdio, http)")
    if (kind == "stdio") != has_command and kind is not None:
        raise ConfigError(f"MCP server {name!r}: `type` {kind!r} does not match its `command`/`url`")
    x = lambda text, key: expand(text, f"{name!r} `{key}`", environ)  # noqa: E731
    allow = entry.get("allow")
    common: dict[str, Any] = {
        "allow": None if allow is None else _strings(allow, f"{name!r} `allow`"),
        "deny": _strings(entry.get("deny", []), f"{name!r} `deny`"),
        "startup_timeout_s": _seconds(
            entry.get("startup_timeout_s", STARTUP_TIMEOUT_S), f"{name!r} `startup_timeout_s`"
        ),
    }
    if "sampling" in entry:
        if not isinstance(entry["sampling"], bool):
            raise ConfigError(f"MCP server {name!r} `sampling` must be true or false")
        common["sampling"] = entry["sampling"]
    if "timeout_s" in entry:
        common["timeout_s"] = _seconds(entry["timeout_s"], f"{name!r} `timeout_s`")
    if has_command:
        if set(entry) & HTTP_KEYS:
            raise ConfigError(f"MCP server {name!r}: `headers` is for a `url` server")
        command = entry["command"]
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"MCP server {name!r}: `command` must be a program name or path")
        env = _table(entry.get("env", {}), f"{name!r} `env`")
        cwd = entry.get("cwd")
        return McpServer(
            name,
            command=x(command, "command"),
            args=tuple(x(a, "args") for a in _strings(entry.get("args", []), f"{name!r} `args`")),
            env={k: x(v, "env") for k, v in env.items()},
            cwd=None if cwd is None else x(str(cwd), "cwd"),
            **common,
        )
    if set(entry) & STDIO_KEYS:
        raise ConfigError(f"MCP server {name!r}: `args`, `env` and `cwd` are for a `command` server")
    url = x(str(entry["url"]), "url")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"MCP server {name!r}: `url` {url!r} is not an http(s) URL")
    headers = _table(entry.get("headers", {}), f"{name!r} `headers`")
    return McpServer(name, url=url, headers={k: x(v, "headers") for k, v in headers.items()}, **common)


def read_source(source: Any) -> tuple[dict[str, Any], str]:
    """(the `mcpServers` object, where it came from) of a file path or an already-read dict."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"`mcp_servers`: cannot read {path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise ConfigError(f"`mcp_servers`: {path} is not JSON ({exc})") from exc
        where = str(path)
    elif isinstance(source, Mapping):
        data, where = dict(source), "mcp_servers"
    else:
        raise ConfigError(f"`mcp_servers` must be a JSON file's path or a dict, not {type(source).__name__}")
    servers = data.get("mcpServers", data) if isinstance(data, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ConfigError(f"`mcp_servers` ({where}): expected an object with `mcpServers`")
    return dict(servers), where


def require_sdk() -> None:
    """ConfigError, before anything starts, when the `mcp` extra (the SDK, jsonschema) is missing."""
    import importlib.util

    for module in ("mcp", "jsonschema"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"`mcp_servers` needs {module}, which is not installed: pip install 'rlmx[mcp]'"
            )


def load_servers(sources: Any, environ: Mapping[str, str] | None = None) -> list[McpServer]:
    """Every server of `sources` (a path, a dict, or a list of them); a name given twice is refused."""
    environ = os.environ if environ is None else environ
    items = list(sources) if isinstance(sources, (list, tuple)) else [sources]
    found: dict[str, McpServer] = {}
    for source in items:
        servers, where = read_source(source)
        for name, entry in servers.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"`mcp_servers` ({where}): a server name must be a non-empty string")
            if name in found:
                raise ConfigError(f"MCP server {name!r} is configured twice")
            server = parse_server(name, entry, environ)
            if server is not None:
                found[name] = server
    return list(found.values())


def portable(sources: Any) -> Any:
    """`sources` as another process (another node) reads them: each file's `mcpServers` object, read
    here, as it is written (its `${VAR}`s are expanded where the servers start); dicts as given."""
    items = list(sources) if isinstance(sources, (list, tuple)) else [sources]
    out = [{"mcpServers": read_source(s)[0]} if isinstance(s, (str, os.PathLike)) else s for s in items]
    return out if isinstance(sources, (list, tuple)) else out[0]


def describe(sources: Any) -> Any:
    """`sources` as a trace records them: paths, and for a dict only its server names."""
    items = list(sources) if isinstance(sources, (list, tuple)) else [sources]
    out: list[Any] = []
    for s in items:
        if isinstance(s, (str, os.PathLike)):
            out.append(str(s))
        elif isinstance(s, Mapping):
            servers = s.get("mcpServers", s)
            out.append({"servers": sorted(str(k) for k in servers)} if isinstance(servers, Mapping) else "?")
        else:
            out.append(type(s).__name__)
    return out
