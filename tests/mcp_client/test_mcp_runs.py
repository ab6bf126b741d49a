"""MCP servers' tools in the REPL, end to end with a scripted root model and the own-SDK server of
tests/mcp_client/servers/small.py: values, validation, errors, the trace, secrets, and the faults."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_support import cells, output_of, repl, scripted_run, small, tool_calls

from rlmx import Limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

SECRET = "tok-very-secret-4711"


def test_a_tool_is_a_repl_function_whose_result_is_a_python_value() -> None:
    code = """
        total = small_add(2, b=5)
        text = small_echo_text(text="ab", times=2)
        same = mcp_call("small", "echo-text", text="z")
        print(type(total).__name__, total, text, same)
    """
    result, events, _ = scripted_run([repl(code), "FINAL_VAR(total)"], {"small": small()})
    assert result.answer == 7, result.error
    assert "int 7 abab z" in output_of(events)
    records = [(t.name, t.server, t.mcp_tool, t.ok) for t in tool_calls(events)]
    assert records == [
        ("small_add", "small", "add", True),
        ("small_echo_text", "small", "echo-text", True),
        ("mcp_call", "small", "echo-text", True),
    ]


def test_arguments_are_checked_against_the_input_schema_before_sending_and_errors_are_tool_errors() -> None:
    code = """
        calls = (
            lambda: small_add(a="x"),
            lambda: small_fails(why="boom"),
            lambda: mcp_call("small", "nope"),
            small_protocol_error,
        )
        for call in calls:
            try:
                call()
            except ToolError as exc:
                print("ToolError:", exc)
        try:
            small_add(1, 2, 3)
        except TypeError as exc:
            print("TypeError:", exc)
    """
    _, events, _ = scripted_run([repl(code), "FINAL(ok)"], {"small": small()})
    out = output_of(events)
    assert (
        "ToolError: small_add: the arguments do not match the tool's input schema: `a`: 'x' is not of type 'integer'"
        in out
    )
    assert "ToolError: MCP tool 'fails' of server 'small' failed: Error executing tool fails" in out
    assert "ToolError: MCP server 'small' has no tool 'nope'" in out
    assert (
        "ToolError: MCP server 'small' answered protocol_error with an error: the server refuses: quota exceeded"
        in out
    )
    assert "TypeError: small_add(): too many positional arguments" in out
    sent = [t for t in tool_calls(events) if t.name == "small_add"]
    assert len(sent) == 1 and not sent[0].ok  # refused on the host, before any request to the server


def test_the_prompt_lists_the_tools_and_mcp_tools_lists_them_all() -> None:
    prompts: list[str] = []

    def first(messages: list[dict[str, Any]], _call: Any) -> str:
        prompts.append(str(messages[0]["content"]))
        return repl(
            "rows = mcp_tools('small')\nprint(sorted(r['tool'] for r in rows)[:3], rows[0]['function'])"
        )

    _, events, _ = scripted_run([first, "FINAL(ok)"], {"small": small(deny=["crash_now"])})
    prompt = prompts[0]
    assert "## MCP tools" in prompt and "`small_add(a: int, b: int = 1)`: Add two integers." in prompt
    assert "small_crash_now" not in prompt  # denied
    assert "['add', 'ask_model', 'echo-text'] small_add" in output_of(events)


def test_a_denied_or_not_allowed_tool_is_refused_by_mcp_call_too() -> None:
    code = """
        try:
            mcp_call("small", "show_env", name="PATH")
        except ToolError as exc:
            print("ToolError:", exc)
        print("has add:", "small_add" in globals(), "has show_env:", "small_show_env" in globals())
    """
    _, events, _ = scripted_run([repl(code), "FINAL(ok)"], {"small": small(allow=["add"])})
    out = output_of(events)
    assert "ToolError: MCP tool 'show_env' of server 'small' is not allowed by its `allow`/`deny`" in out
    assert "has add: True has show_env: False" in out


def test_a_stdio_server_gets_a_minimal_environment_and_secrets_stay_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-key-9")
    monkeypatch.setenv("MY_TOKEN", SECRET)
    trace = tmp_path / "run.jsonl"
    code = """
        import os
        needle = "tok-very-" + "secret"  # the cell's own text is in the REPL too
        print("worker env has it:", any(needle in v for v in os.environ.values()))
        names = {k: v for k, v in globals().items() if k != "needle"}
        docs = [getattr(v, "__doc__", "") or "" for v in names.values()]
        print("worker globals have it:", needle in repr(names) + repr(docs))
        seen = [small_show_env("OPENAI_API_KEY"), len(small_show_env("TOKEN")), small_show_env("PATH") != ""]
        print("server saw", seen)
    """
    servers = {"small": small(env={"TOKEN": "${MY_TOKEN}", "LITERAL": SECRET})}
    _, events, _ = scripted_run([repl(code), "FINAL(ok)"], servers, trace=str(trace))
    out = output_of(events)
    assert "server saw ['', 20, True]" in out
    assert "worker env has it: False" in out and "worker globals have it: False" in out
    text = trace.read_text()
    # the only place the secret shows is the tool result the model asked for; never the configuration
    assert text.count(SECRET) == sum(1 for t in tool_calls(events) if SECRET in json.dumps(t.result))
    start = json.loads(text.splitlines()[0])
    assert start["spec"]["mcp_servers"] == [{"servers": ["small"]}]


# --- faults -----------------------------------------------------------------------------------------


def test_a_server_that_fails_to_start_is_one_line_and_the_run_goes_on() -> None:
    code = "print('has it:', 'broken_add' in globals(), small_add(1))"
    started = time.monotonic()
    result, events, _ = scripted_run(
        [repl(code), "FINAL(ok)"],
        {"broken": small("fail"), "absent": {"command": "rlmx-no-such-mcp-server"}, "small": small()},
    )
    assert result.answer == "ok" and time.monotonic() - started < 30
    warnings = next(e for e in events if type(e).__name__ == "RunStart").warnings
    assert any(
        w.startswith("MCP server 'broken'") and "did not start" in w and "cannot open its database" in w
        for w in warnings
    ), warnings
    assert any(w.startswith("MCP server 'absent' (rlmx-no-such-mcp-server) did not start") for w in warnings)
    assert "has it: False 2" in output_of(events)


def test_a_server_that_hangs_at_start_is_given_up_after_its_startup_timeout() -> None:
    started = time.monotonic()
    result, events, _ = scripted_run(["FINAL(ok)"], {"hung": small("hang", startup_timeout_s=1.5)})
    assert result.answer == "ok" and time.monotonic() - started < 15
    warnings = next(e for e in events if type(e).__name__ == "RunStart").warnings
    assert warnings == [
        "MCP server 'hung' (" + sys.executable + ") did not start: it did not answer within 1.5 s "
        "(startup_timeout_s); the run goes on without its tools"
    ]


def test_a_server_that_crashes_mid_run_fails_that_call_and_the_next_ones_with_a_reason() -> None:
    code = """
        for call in (small_crash_now, lambda: small_add(1)):
            try:
                call()
            except ToolError as exc:
                print("ToolError:", exc)
    """
    result, events, _ = scripted_run([repl(code), "FINAL(went on)"], {"small": small()})
    assert result.answer == "went on"
    out = output_of(events)
    assert "ToolError: MCP server 'small' failed during crash_now: Connection closed" in out
    assert "ToolError: MCP server 'small' is not running: Connection closed" in out


def test_a_slow_call_times_out_and_oversized_output_is_refused() -> None:
    code = """
        for call in (lambda: small_slow(seconds=30), lambda: small_huge_text(megabytes=3)):
            try:
                call()
            except ToolError as exc:
                print("ToolError:", exc)
        print(small_add(40, 2))
    """
    started = time.monotonic()
    _, events, _ = scripted_run(
        [repl(code), "FINAL(ok)"], {"small": small(timeout_s=1.5)}, tool_max_bytes=1_000_000
    )
    out = output_of(events)
    assert time.monotonic() - started < 25
    assert "ToolError: small_slow did not return within 1.5 s and was abandoned" in out
    assert "ToolError: small_huge_text returned 3,000,002 bytes as JSON; the limit is 1,000,000" in out
    assert "\n42" in out  # the server still answers after both


def test_a_server_with_hundreds_of_tools_lists_some_in_the_prompt_and_all_in_mcp_tools() -> None:
    prompts: list[str] = []

    def first(messages: list[dict[str, Any]], _call: Any) -> str:
        prompts.append(str(messages[0]["content"]))
        return repl("print(len(mcp_tools()), many_t299(x=1))")

    _, events, _ = scripted_run([first, "FINAL(ok)"], {"many": small("many")})
    prompt = prompts[0]
    listed = [line for line in prompt.splitlines() if line.startswith("- `many_")]
    assert len(listed) == 40
    assert "- ... and 271 more: `mcp_tools()` lists them all" in prompt
    assert "311 300" in output_of(events)


def test_sampling_requests_from_a_server_are_refused_with_a_clear_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="rlmx.mcp"):
        result, events, _ = scripted_run(
            [repl("print(small_ask_model(question='hi'))"), "FINAL(ok)"], {"small": small()}
        )
    assert "refused: rlmx refuses sampling/createMessage: this client does not offer it" in output_of(events)
    assert result.answer == "ok" and len(cells(events)) == 1
    said = [r.getMessage() for r in caplog.records if r.name == "rlmx.mcp"]
    assert said == [
        "MCP server 'small' asked rlmx for sampling/createMessage, which rlmx does not offer; refused"
    ]


def test_a_server_that_opted_in_gets_sampling_through_the_runs_ledger_and_budget() -> None:
    code = "print(small_ask_model(question='a'))\nprint(small_ask_model(question='b'))"
    result, events, model = scripted_run(
        [repl(code), "FINAL(ok)"], {"small": small(sampling=True)}, limits=Limits(max_llm_calls=3)
    )
    out = output_of(events).splitlines()
    assert out[0].startswith("sampled: ") and "text='sub-answer'" in out[0] and "model='scripted'" in out[0]
    assert out[1] == (
        "refused: rlmx could not sample: budget exhausted: max_llm_calls=3 reached (the last call is kept for "
        "the final answer); no more sub-calls can be made, answer from what you have"
    )
    assert model.purposes[:2] == [("root", 0), ("llm_query", 1)]  # the sampling call, a sub-call of the run
    sampled = [e for e in events if type(e).__name__ == "LMCall" and e.depth == 1]
    assert len(sampled) == 1 and result.usage["calls"] == len(model.calls)


def test_children_get_the_mcp_functions_too() -> None:
    result, events, _ = scripted_run(
        [repl("r = rlm_query('go')"), "FINAL_VAR(r)"],
        {"small": small()},
        child=[repl("FINAL(str(small_add(1, b=41)))")],
        limits=Limits(max_depth=2),
    )
    assert result.answer == "42", result.error
    [call] = tool_calls(events)
    assert call.depth == 1 and (call.server, call.mcp_tool) == ("small", "add")
