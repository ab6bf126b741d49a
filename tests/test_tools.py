"""The user's own tools in the REPL: host functions behind stubs, plain values, their failures, their
limits, children's tools, the prompt, the trace and `rlmx ask --tools`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from event_support import cells, output_of, tool_calls
from policies import repl
from rlmx import RLM, ConfigError, Limits, SandboxSettings, Tool
from rlmx.testing import ScriptedModel, ScriptedServer
from rlmx.trace.events import Event, ToolCall

ROOT = Path(__file__).resolve().parent.parent
FENCE = "`" * 3
LOCAL = SandboxSettings(backend="local")


def run(
    turns: list[Any], *, child: list[Any] | None = None, **settings: Any
) -> tuple[Any, list[Event], ScriptedModel]:
    model = ScriptedModel(root=turns, child=child, final="FINAL(forced)")
    events: list[Event] = []
    settings.setdefault("trace", False)
    result = RLM(model.lm(), on_event=events.append, **settings).run("q", "some context")
    return result, events, model


# --- a host function, in the isolated sandbox -------------------------------------------------------


def test_a_host_function_runs_in_the_host_and_reads_what_the_sandbox_cannot(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    pids: list[int] = []

    def read_secret(prefix: str = "") -> str:
        """Read the host's secret file."""
        pids.append(os.getpid())
        return prefix + secret.read_text()

    code = f"""
        got = read_secret(prefix="> ")
        print("repl pid", os.getpid())
        try:
            open({str(secret)!r}).read()
            print("SANDBOX READ IT")
        except OSError as exc:
            print("sandbox could not read:", type(exc).__name__)
    """
    result, events, _ = run(
        [repl("import os\n" + textwrap.dedent(code)), "FINAL_VAR(got)"], tools={"read_secret": read_secret}
    )
    assert result.answer == "> the host's secret", result.error
    assert pids == [os.getpid()]  # the function ran here, in the test's own process
    out = output_of(events)
    assert "sandbox could not read" in out and "SANDBOX READ IT" not in out
    repl_pid = int(re.search(r"repl pid (\d+)", out).group(1))  # type: ignore[union-attr]
    assert repl_pid != os.getpid()
    [call] = tool_calls(events)
    assert call.name == "read_secret" and call.ok and call.depth == 0
    assert json.loads(call.arguments["text"]) == {"args": [], "kwargs": {"prefix": "> "}}  # type: ignore[index]
    assert call.result["text"] == json.dumps("> the host's secret")  # type: ignore[index]
    assert call.parent_id == cells(events)[0].id


def test_the_stub_has_the_signature_and_checks_arguments_before_the_call() -> None:
    calls: list[Any] = []

    def lookup(user_id: int, *, verbose: bool = False) -> dict[str, Any]:
        """Look up a user by id.

        More text the prompt does not show."""
        calls.append(user_id)
        return {"id": user_id}

    code = """
        import inspect
        print(inspect.signature(lookup), lookup.__name__, lookup.__doc__.splitlines()[0])
        lookup(1, 2)
    """
    _, events, _ = run([repl(textwrap.dedent(code)), "FINAL(done)"], tools=[lookup], sandbox=LOCAL)
    out = output_of(events)
    assert "(user_id: int, *, verbose: bool = False) -> dict[str, Any] lookup Look up a user by id." in out
    assert "TypeError: lookup(): too many positional arguments" in out
    assert calls == [] and tool_calls(events) == []  # refused in the REPL: nothing crossed


# --- values, failures, limits -------------------------------------------------------------------------


def test_a_plain_value_is_copied_into_the_repl_once() -> None:
    rates = {"eur": 1.1, "gbp": 1.3}
    code = "RATES['eur'] = 99\nkept = RATES['eur']\nRATES = 'rebound'"
    result, events, _ = run([repl(code), "FINAL_VAR(RATES)"], tools={"RATES": rates})
    assert rates == {"eur": 1.1, "gbp": 1.3}  # the host's object is untouched
    assert result.answer == {"eur": 99, "gbp": 1.3}  # the REPL's copy: the name was put back
    assert "'RATES' is reserved and was restored" in output_of(events)
    assert tool_calls(events) == []  # a value is no call


def test_a_tool_that_raises_is_an_error_in_the_cell() -> None:
    def fails(x: int) -> int:
        raise KeyError(f"no row {x}")

    code = "try:\n    fails(7)\nexcept ToolError as exc:\n    caught = str(exc)\nprint(caught)"
    result, events, _ = run([repl(code), "FINAL_VAR(caught)"], tools={"fails": fails})
    assert result.answer == "fails raised KeyError: 'no row 7'"
    [call] = tool_calls(events)
    assert not call.ok and call.error == "fails raised KeyError: 'no row 7'" and call.result is None
    # uncaught, it is the cell's error like any other
    _, events, _ = run([repl("fails(1)"), "FINAL(x)"], tools={"fails": fails}, sandbox=LOCAL)
    assert "ToolError: fails raised KeyError: 'no row 1'" in (cells(events)[0].error or "")


def test_a_result_that_is_not_json_or_too_large_is_refused() -> None:
    tools = {"bad": lambda: {1, 2}, "big": lambda n: "x" * n, "nan": lambda: float("nan")}
    code = """
        for call in (lambda: bad(), lambda: big(5000), lambda: nan(), lambda: big({"a": object()})):
            try:
                call()
            except (ToolError, TypeError) as exc:
                print(f"{type(exc).__name__}: {exc}")
        print(big(10))
    """
    _, events, _ = run([repl(textwrap.dedent(code)), "FINAL(x)"], tools=tools, tool_max_bytes=1000)
    out = output_of(events)
    assert "ToolError: bad returned a set, which cannot be sent back as JSON" in out
    assert "ToolError: big returned 5,002 bytes as JSON; the limit is 1,000" in out
    assert "ToolError: nan returned a float, which cannot be sent back as JSON" in out
    assert "TypeError: big: its arguments must be JSON values" in out  # refused before the wire
    assert "xxxxxxxxxx" in out
    assert [c.ok for c in tool_calls(events)] == [False, False, False, True]


def test_arguments_over_the_cap_are_refused_by_the_host_too() -> None:
    """The REPL's own check can be bypassed by model code; the host checks again."""
    code = (
        "worker = [o for o in gc.get_objects() if type(o).__name__ == 'Worker'][0]\n"
        "try:\n    worker.rpc('tool', {'name': 'echo', 'args': ['y' * 5000], 'kwargs': {}})\n"
        "except Exception as exc:\n    print('refused:', exc)\n"
        "try:\n    worker.rpc('tool', {'name': 'print', 'args': [], 'kwargs': {}})\n"
        "except Exception as exc:\n    print('refused:', exc)\n"
    )
    _, events, _ = run(
        [repl("import gc\n" + code), "FINAL(x)"], tools={"echo": lambda s: s}, tool_max_bytes=1000
    )
    assert "refused: there is no tool named 'print' in this REPL" in output_of(events)
    assert "refused: echo: the arguments are 5," in output_of(events)


def test_a_call_past_its_timeout_fails_at_once_and_never_holds_the_run() -> None:
    release = threading.Event()

    def stuck(x: int) -> int:
        release.wait(60)
        return x

    code = "try:\n    stuck(1)\nexcept ToolError as exc:\n    print('error:', exc)"
    started = time.monotonic()
    try:
        result, events, _ = run([repl(code), "FINAL(over)"], tools={"stuck": Tool(stuck, timeout_s=0.3)})
    finally:
        release.set()
    assert time.monotonic() - started < 10
    assert result.answer == "over"
    assert "error: stuck did not return within 0.3 s and was abandoned" in output_of(events)
    [call] = tool_calls(events)
    assert not call.ok and call.thread_left_running and 0.25 < call.duration_s < 5


def test_a_process_exits_promptly_with_a_tool_thread_still_stuck() -> None:
    """The abandoned thread (a daemon) delays neither `run()`'s return nor the interpreter's exit."""
    script = textwrap.dedent(
        """
        import time
        from rlmx import RLM
        from rlmx.testing import ScriptedModel
        F = "`" * 3
        model = ScriptedModel(root=[F + "repl\\ntry:\\n    nap()\\nexcept Exception as e:\\n    print(e)\\n" + F,
                                    "FINAL(done)"])
        result = RLM(model.lm(), trace=False, tools={"nap": lambda: time.sleep(120)},
                     tool_timeout_s=0.3).run("q", "c")
        print(result.answer)
        """
    )
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert time.monotonic() - started < 30


def test_a_tool_call_is_bounded_by_the_runs_time() -> None:
    async def sleepy() -> str:  # a coroutine runs on the loop and is cancelled
        import asyncio

        await asyncio.sleep(60)
        return "late"

    code = "try:\n    sleepy()\nexcept ToolError as exc:\n    print('error:', exc)"
    started = time.monotonic()
    _, events, _ = run(
        [repl(code), "FINAL(x)"], tools={"sleepy": sleepy}, limits=Limits(timeout_s=3), tool_timeout_s=60
    )
    assert time.monotonic() - started < 10
    [call] = tool_calls(events)  # stopped by its timeout (the time left) or by the run's deadline
    assert not call.ok and not call.thread_left_running and call.duration_s < 4
    assert "did not return within" in str(call.error) or "cancelled" in str(call.error)


def test_a_coroutine_tool_runs_on_the_loop() -> None:
    async def add(a: int, b: int = 2) -> int:
        return a + b

    result, _, _ = run([repl("s = add(40)"), "FINAL_VAR(s)"], tools={"add": add}, sandbox=LOCAL)
    assert result.answer == 42


# --- construction --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["context", "llm_query", "answer", "FINAL", "FINAL_VAR", "context_1", "ctx"])
def test_a_reserved_name_is_refused_at_construction(name: str) -> None:
    with pytest.raises(ConfigError, match=f"tool name '{name}' is taken"):
        RLM(ScriptedModel(root=["FINAL(x)"]).lm(), tools={name: lambda: 1}, trace=False)
    with pytest.raises(ConfigError, match=f"tool name '{name}' is taken"):
        RLM(ScriptedModel(root=["FINAL(x)"]).lm(), sub_tools={name: 1}, trace=False)


def test_other_bad_tools_are_refused_at_construction() -> None:
    lm = ScriptedModel(root=["FINAL(x)"]).lm()
    with pytest.raises(ConfigError, match="not a Python identifier"):
        RLM(lm, tools={"two words": len})
    with pytest.raises(ConfigError, match="neither callable nor a JSON value"):
        RLM(lm, tools={"handle": object()})
    with pytest.raises(ConfigError, match="needs a name"):
        RLM(lm, tools=[{"a": 1}])
    with pytest.raises(ConfigError, match="tool_timeout_s must be > 0"):
        RLM(lm, tools={"f": len}, tool_timeout_s=0)


# --- the prompt, the official form, every profile ----------------------------------------------------


def system_prompt_of(model_turn: list[str], **settings: Any) -> tuple[Any, str, list[Event]]:
    seen: list[str] = []

    def first(messages: list[dict[str, Any]], call: Any) -> str:
        seen.append(messages[0]["content"])
        return model_turn[0]

    result, events, _ = run([first, *model_turn[1:]], **settings)
    return result, seen[0], events


def test_the_official_dict_form_and_the_prompt_under_every_profile(tmp_path: Path) -> None:
    def find(name: str) -> int:
        return len(name)

    tools = {
        "find": {"tool": find, "description": "Length of a name, looked up on the host."},
        "LIMIT": {"tool": 5, "description": "How many rows to show."},
    }
    answer = 'answer["content"] = str(find("abc") + LIMIT)\nanswer["ready"] = True'
    result, system, _ = system_prompt_of([repl(answer)], tools=tools, prompt="official", sandbox=LOCAL)
    assert result.answer == "8"
    assert "- `find(name: str) -> int`: Length of a name, looked up on the host." in system
    assert "- `LIMIT`: a int value: How many rows to show." in system

    result, system, _ = system_prompt_of([repl("FINAL(find('ab'))")], tools=tools, sandbox=LOCAL)
    assert result.answer == "2" and "`find(name: str) -> int`" in system

    plain = tmp_path / "plain.md"
    plain.write_text("You answer questions with code.")
    _, system, _ = system_prompt_of(["FINAL(x)"], tools=tools, prompt=str(plain), sandbox=LOCAL)
    assert system.startswith("You answer questions with code.\n\n## Tools") and "`LIMIT`" in system

    placed = tmp_path / "placed.md"
    placed.write_text("Before.\n{{tools}}\nAfter.")
    _, system, _ = system_prompt_of(["FINAL(x)"], tools=tools, prompt=str(placed), sandbox=LOCAL)
    assert system.startswith("Before.\n## Tools") and system.endswith("After.")
    _, system, _ = system_prompt_of(["FINAL(x)"], prompt=str(placed), sandbox=LOCAL)
    assert system == "Before.\n\nAfter."  # no tools: the placeholder is empty

    _, system, _ = system_prompt_of(["FINAL(x)"], sandbox=LOCAL)
    assert "## Tools" not in system


# --- children -------------------------------------------------------------------------------------------


def test_tools_reach_a_grandchild_at_depth_2() -> None:
    seen: list[int] = []

    def where(level: int) -> str:
        seen.append(level)
        return f"host saw {level}"

    def child(messages: list[dict[str, Any]], call: Any) -> str:
        if call.depth == 1:
            return repl("r = rlm_query('go deeper')\nFINAL(r)")
        return repl("FINAL(where(2))")

    result, events, _ = run(
        [repl("r = rlm_query('go')"), "FINAL_VAR(r)"],
        child=[child],
        tools={"where": where},
        limits=Limits(max_depth=3),
    )
    assert result.answer == "host saw 2", result.error
    assert seen == [2]
    [call] = tool_calls(events)
    assert call.depth == 2 and call.ok


def test_sub_tools_replace_the_tools_of_children() -> None:
    code = "print('root has', sorted(n for n in ('mine', 'theirs') if n in globals()))\nr = rlm_query('go')"
    child = repl("FINAL(str(sorted(n for n in ('mine', 'theirs') if n in globals())) + theirs())")
    result, events, _ = run(
        [repl(code), "FINAL_VAR(r)"],
        child=[child],
        tools={"mine": lambda: "m"},
        sub_tools={"theirs": lambda: "!"},
        limits=Limits(max_depth=2),
    )
    [root_cell] = [c for c in cells(events) if c.depth == 0]
    assert "root has ['mine']" in str(root_cell.output)
    assert result.answer == "['theirs']!", result.error
    assert [c.depth for c in tool_calls(events)] == [1]


# --- the docs' example and the CLI ---------------------------------------------------------------------


def python_blocks(path: Path, heading: str) -> str:
    section = path.read_text().split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"no python block after {heading!r} in {path.name}"
    return match.group(1)


def test_the_docs_sqlite_example_runs_as_written() -> None:
    code = python_blocks(ROOT / "docs" / "tools.md", "## Example")
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/tools.md", "exec"), namespace)  # it asserts its own results
    assert namespace["result"].answer == "Linus is on the free plan ($0 a month)"


def test_the_readme_tools_example_runs_as_written() -> None:
    code = python_blocks(ROOT / "README.md", "## Your own tools")
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["result"].answer == "42"


def test_ask_takes_tools_from_a_module(tmp_path: Path) -> None:
    (tmp_path / "mytools_for_test.py").write_text(
        "import os\n\n"
        "def double(n: int) -> int:\n    '''Twice n.'''\n    return 2 * n\n\n"
        "def host_pid() -> int:\n    return os.getpid()\n\n"
        "TOOLS = {'double': double, 'SCALE': 10}\nMORE = [host_pid]\n"
    )
    trace = tmp_path / "run.jsonl"
    policy = ScriptedModel(root=[repl("FINAL(str(double(21) * SCALE + 0 * host_pid()))")])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    with ScriptedServer(policy) as srv:
        base = ask_command(srv)
        proc = subprocess.run(
            [*base, "--tools", "mytools_for_test:TOOLS", "--tools", "mytools_for_test:MORE", "--json",
             "--trace", str(trace)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["answer"] == "420"
        system = srv.requests[0].messages[0]["content"]
        assert "`double(n: int) -> int`: Twice n." in system and "`host_pid() -> int`" in system
        records = [json.loads(line) for line in trace.read_text().splitlines()]
        assert [r["name"] for r in records if r["type"] == ToolCall.TYPE] == ["double", "host_pid"]

        bad = subprocess.run(
            [*base, "--tools", "no_such_module_here:TOOLS"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    assert bad.returncode == 2 and "cannot import 'no_such_module_here'" in bad.stderr
    assert srv.served == 1  # refused before any model call


def test_the_config_files_tools_apply_to_ask_and_a_bad_entry_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cfgtools_for_test.py").write_text(
        "def triple(n: int) -> int:\n    '''Three times n.'''\n    return 3 * n\n\nTOOLS = [triple]\n"
    )
    config = tmp_path / "rlmx-test.toml"
    config.write_text('tools = ["cfgtools_for_test:TOOLS"]\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    policy = ScriptedModel(root=[repl("FINAL(str(triple(14)))")])
    with ScriptedServer(policy) as srv:
        base = ask_command(srv)
        proc = subprocess.run(
            [*base, "--config", str(config), "--no-trace"],
            capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "42"
        config.write_text("tools = [1, 2]\n")
        bad = subprocess.run(
            [*base, "--config", str(config)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=tmp_path,
        )
    assert bad.returncode == 2 and 'list of "MODULE:ATTR" strings' in bad.stderr
    assert srv.served == 1


def ask_command(srv: ScriptedServer) -> list[str]:
    """`rlmx ask q` against the scripted server, as a subprocess's argv."""
    return [sys.executable, "-m", "rlmx.cli", "ask", "q", "--model", "openai:scripted", "--base-url", srv.url]
