"""The MCP client's pieces without servers: the `mcpServers` format, `${VAR}` expansion, the minimal
environment, the naming rule, signatures from input schemas, result conversion, the spec's data."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rlmx import RunSpec
from rlmx.engine.tools import ToolFailed
from rlmx.errors import ConfigError
from rlmx.mcp.config import expand, load_servers, minimal_env
from rlmx.mcp.tools import build_toolset, identifier, parameters, result_value


def test_the_mcp_servers_format_of_claude_desktop_cursor_and_mcp_json(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": "uvx",
                        "args": ["mcp-server-time", "--local-timezone=${TZ_NAME:-UTC}"],
                    },
                    "remote": {
                        "type": "http",
                        "url": "https://${HOST}/mcp",
                        "headers": {"Authorization": "Bearer ${KEY}"},
                    },
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    servers = load_servers(str(path), {"HOST": "example.com", "KEY": "k1"})
    assert [s.name for s in servers] == ["time", "remote"]
    time_server, remote = servers
    assert time_server.transport == "stdio" and time_server.args == (
        "mcp-server-time",
        "--local-timezone=UTC",
    )
    assert remote.transport == "http" and remote.url == "https://example.com/mcp"
    assert remote.headers == {"Authorization": "Bearer k1"}
    assert "k1" not in repr(remote)  # headers and env are never in a repr (logs, tracebacks)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"type": "sse", "url": "http://h/sse"}, 'the SSE transport (`"type": "sse"`) is not supported'),
        ({"command": "x", "url": "http://h"}, "needs exactly one of `command` (stdio) and `url` (HTTP)"),
        ({"url": "ftp://h"}, "is not an http(s) URL"),
        ({"command": "x", "headers": {}}, "`headers` is for a `url` server"),
        ({"command": "x", "envv": {}}, "unknown key 'envv'"),
        ({"command": "x", "env": {"A": 1}}, "`env` must be an object of strings"),
        ({"command": "x", "timeout_s": 0}, "`timeout_s` must be a number of seconds > 0"),
        ({"command": "${NOT_SET_HERE}"}, "uses ${NOT_SET_HERE}, which is not set"),
    ],
)
def test_a_bad_entry_is_refused_by_name(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_servers({"mcpServers": {"s": entry}}, {})
    assert "MCP server 's'" in str(caught.value) and message in str(caught.value)


def test_variables_expand_as_claude_code_does() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert expand("${A}-${B:-two}-${EMPTY:-dflt}-${EMPTY}", "x", env) == "1-two-dflt-"
    assert expand("$A and ${A", "x", env) == "$A and ${A"  # only ${NAME} forms


def test_a_stdio_server_inherits_only_a_minimal_environment() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C.UTF-8", "OPENAI_API_KEY": "sk-1", "AWS_SECRET": "s"}
    assert minimal_env({"TOKEN": "t"}, environ) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C.UTF-8",
        "TOKEN": "t",
    }


def test_the_naming_rule() -> None:
    assert identifier("get-current_time") == "get_current_time"
    assert identifier("read.file v2") == "read_file_v2"
    assert identifier("2fa") == "_2fa"
    assert identifier("from") == "from_" and identifier("match") == "match"  # a soft keyword is a name
    assert identifier("") == "_"


def test_a_signature_from_an_input_schema_required_first() -> None:
    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "default": 10},
            "path": {"type": "string"},
            "from": {"type": ["string", "null"]},
        },
        "required": ["path"],
    }
    params, names = parameters(schema)
    assert [str(p) for p in params] == ["path: 'str'", "limit: 'int' = 10", "from_: 'str | None' = None"]
    assert names == {"path": "path", "limit": "limit", "from_": "from"}
    with pytest.raises(ValueError, match="'a-b' and 'a_b' both become 'a_b'"):
        parameters({"properties": {"a-b": {}, "a_b": {}}})


def block(kind: str, **fields: Any) -> Any:
    return SimpleNamespace(type=kind, **fields)


def result(*blocks: Any, structured: Any = None, is_error: bool = False) -> Any:
    return SimpleNamespace(content=list(blocks), structured_content=structured, is_error=is_error)


def test_results_become_python_values_and_nothing_is_dropped_silently() -> None:
    assert result_value(result(block("text", text="hi")), "s", "t") == "hi"
    assert (
        result_value(
            result(block("text", text="7"), structured={"result": 7}),
            "s",
            "t",
            {"properties": {"result": {}}},
        )
        == 7
    )
    assert result_value(result(structured={"a": 1, "b": [2]}), "s", "t") == {"a": 1, "b": [2]}
    image = block("image", data="A" * 400, mime_type="image/png")
    link = block("resource_link", uri="file:///x.txt", name="x")
    assert result_value(result(block("text", text="see"), image, link), "s", "t") == [
        "see",
        "[image image/png, about 300 bytes: not shown in the REPL]",
        "[resource link file:///x.txt (x)]",
    ]
    text_resource = block("resource", resource=SimpleNamespace(uri="mem://a", text="body"))
    assert result_value(result(text_resource), "s", "t") == "body"
    with pytest.raises(ToolFailed, match="MCP tool 't' of server 's' failed: no such file"):
        result_value(result(block("text", text="no such file"), is_error=True), "s", "t")


class FakeHub:
    def __init__(self, tools: dict[str, list[Any]]) -> None:
        self.tools = tools
        self.connections = {
            name: SimpleNamespace(
                server=SimpleNamespace(name=name, timeout_s=None, allows=lambda t: t != "secret")
            )
            for name in tools
        }

    def running(self) -> list[str]:
        return list(self.tools)

    def tools_of(self, name: str) -> list[Any]:
        return self.tools[name]


def tool(name: str, description: str = "") -> Any:
    return SimpleNamespace(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": {}},
        output_schema=None,
    )


def test_collisions_and_taken_names_get_no_function_and_say_so_by_name() -> None:
    said: list[str] = []
    hub = FakeHub(
        {"fs": [tool("read-file"), tool("read_file"), tool("list"), tool("secret")], "context": [tool("x")]}
    )
    tools, prompt = build_toolset(hub, {"fs_list"}, said.append)
    assert sorted(tools.tools) == ["context_x", "mcp_call", "mcp_tools"]
    assert any(
        "fs/read-file, fs/read_file all become 'fs_read_file'; none gets a function (use mcp_call)" in s
        for s in said
    )
    assert any("'fs_list' is already a tool's name" in s for s in said)
    assert "fs_secret" not in prompt and "## MCP tools" in prompt


def test_a_spec_records_server_names_only_and_ships_unexpanded_configurations(tmp_path: Path) -> None:
    config = {"mcpServers": {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}}
    path = tmp_path / "more.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    spec = RunSpec("openai:gpt-5-mini", mcp_servers=[config, str(path)])
    assert spec.record()["mcp_servers"] == [{"servers": ["gh"]}, str(path)]
    data = spec.to_data()  # the file's servers travel with the data: a Ray node need not have the file
    assert data["mcp_servers"] == [config, {"mcpServers": {"time": {"command": "mcp-server-time"}}}]
    assert RunSpec.from_data(json.loads(json.dumps(data))).mcp_servers == data["mcp_servers"]


def test_mcp_servers_of_the_wrong_kind_are_refused_when_the_rlm_is_made() -> None:
    with pytest.raises(ConfigError, match="mcp_servers must be an `mcpServers` JSON file's path, a dict"):
        RunSpec("openai:gpt-5-mini", mcp_servers=42)


def test_without_the_mcp_extra_a_run_with_servers_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from rlmx.mcp.config import require_sdk

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    with pytest.raises(
        ConfigError, match=r"`mcp_servers` needs mcp, which is not installed: pip install 'rlmx\[mcp\]'"
    ):
        require_sdk()
