"""rlmx.integrations.dspy.Interpreter as DSPy's CodeInterpreter protocol has it: results, SUBMIT, errors as
DSPy's classes, tools, variables, isolation (`dspy.RLM` on it: test_dspy_rlm.py). Runs against the DSPy
this interpreter imports; test_dspy_releases.py runs it again against each supported release
(RLMX_DSPY_EXPECT names the one that must be imported)."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import math
import os
import select
import socket
from dataclasses import dataclass
from typing import Any

import pytest
from dspy_support import dspy_or_skip

dspy_or_skip()

import dspy  # noqa: E402
import pydantic  # noqa: E402
from dspy.primitives.code_interpreter import CodeInterpreter, CodeInterpreterError, FinalOutput  # noqa: E402

from rlmx import SandboxSettings  # noqa: E402
from rlmx.integrations.dspy import Interpreter  # noqa: E402
from rlmx.integrations.dspy.classes import CodeExecutionError  # noqa: E402


def test_the_expected_release_is_imported() -> None:
    expected = os.environ.get("RLMX_DSPY_EXPECT")
    assert expected in (None, dspy.__version__), f"imported DSPy {dspy.__version__}, expected {expected}"


@pytest.fixture
def interp() -> Any:
    interpreter = Interpreter()
    yield interpreter
    interpreter.shutdown()


# --- the protocol ------------------------------------------------------------------------------------


def test_it_is_a_code_interpreter_whose_runtime_is_described_on_the_class(interp: Interpreter) -> None:
    assert isinstance(interp, CodeInterpreter)
    assert (
        "CPython" in Interpreter.execution_instructions and "no network" in Interpreter.execution_instructions
    )
    interp.start()
    interp.start()  # idempotent
    assert interp.execute("import sys\nsys.implementation.name") == "cpython"
    interp.shutdown()
    with pytest.raises(CodeInterpreterError, match="session has ended"):
        interp.execute("1")
    with pytest.raises(CodeInterpreterError, match="session has ended"):
        interp.start()


def test_results_are_the_value_the_output_or_none_and_state_persists(interp: Interpreter) -> None:
    assert interp.execute("print('a')\nprint('b')") == "a\nb\n"
    assert interp.execute("total = 40") is None
    assert interp.execute("total += 2\ntotal") == 42
    assert interp.execute("def double(x):\n    return 2 * x") is None
    assert interp.execute("double(total)") == 84
    assert interp.execute("{'k': (1, 2)}") == {"k": [1, 2]}  # JSON values, as DSPy's interpreters
    assert interp.execute("object()").startswith("<object object at")  # else the repr


def test_the_namespace_is_dspys_alone() -> None:
    interpreter = Interpreter(tools={"lookup": lambda key: key})
    try:
        names = interpreter.execute("sorted(n for n in globals() if not n.startswith('__'))", {"doc": "x"})
    finally:
        interpreter.shutdown()
    assert names == ["SUBMIT", "doc", "lookup"]  # no context, llm_query, FINAL, peek, ... of rlmx's


def test_submit_returns_final_output_with_the_fields_given(interp: Interpreter) -> None:
    assert interp.execute("SUBMIT([1, 'two'])") == FinalOutput({"output": [1, "two"]})
    interp.output_fields = [{"name": "answer", "type": "str"}, {"name": "score", "type": "int"}]
    interp._tools_registered = False
    assert interp.execute("SUBMIT('yes', score=3)") == FinalOutput({"answer": "yes", "score": 3})
    with pytest.raises(CodeExecutionError, match="missing 1 required positional argument: 'score'"):
        interp.execute("SUBMIT('only one')")
    assert interp.execute("SUBMIT = None\nprint('rebound')") == "rebound\n"
    assert isinstance(interp.execute("SUBMIT(answer='a', score=1)"), FinalOutput)  # put back


def test_syntax_and_runtime_errors_raise_dspys_classes(interp: Interpreter) -> None:
    with pytest.raises(SyntaxError, match="Invalid Python syntax"):
        interp.execute("def broken(:\n    pass")
    with pytest.raises(CodeExecutionError, match=r"line 2, in <module>\nZeroDivisionError") as caught:
        interp.execute("print('before')\n1 / 0")
    assert isinstance(caught.value, CodeInterpreterError) and "before" in str(caught.value)
    with pytest.raises(CodeExecutionError, match="SystemExit"):
        interp.execute("raise SystemExit(3)")
    assert interp.execute("'still alive'") == "still alive"


def test_a_dead_worker_ends_the_session(interp: Interpreter) -> None:
    interp.execute("kept = 1")
    assert interp._sandbox is not None and interp._sandbox.handle is not None
    handle = interp._sandbox.handle
    handle.kill()
    select.select([handle.pidfd], [], [], 5)  # readable once the worker is gone
    with pytest.raises(CodeInterpreterError, match="interpreter state was lost") as caught:
        interp.execute("kept")
    assert type(caught.value) is CodeInterpreterError  # not the recoverable CodeExecutionError
    with pytest.raises(CodeInterpreterError, match="session has ended"):
        interp.execute("1")


def test_a_timeout_ends_the_session() -> None:
    interpreter = Interpreter(execution_timeout=0.5)
    try:
        with pytest.raises(CodeInterpreterError, match=r"exceeded execution timeout of 0\.5 seconds"):
            interpreter.execute("while True:\n    pass")
        with pytest.raises(CodeInterpreterError, match="session has ended"):
            interpreter.execute("1")
    finally:
        interpreter.shutdown()


# --- tools -------------------------------------------------------------------------------------------


def search(query: str, limit: int = 2, *, tag: str = "t") -> list[dict[str, Any]]:
    """Search the index."""
    return [{"query": query, "rank": i, "tag": tag} for i in range(limit)]


def stats(*values: float, **options: str) -> dict[str, Any]:
    return {"n": len(values), "sum": sum(values), "options": options}


async def fetch(key: str) -> dict[str, str]:
    await asyncio.sleep(0.01)
    return {"key": key, "value": key[::-1]}


@dataclass
class Box:
    width: int
    height: int


class Hit(pydantic.BaseModel):
    doc: int
    title: str


def test_tools_take_keyword_and_positional_arguments_and_return_lists_and_dicts() -> None:
    tools = {"search": search, "stats": stats, "box": lambda: Box(2, 3), "hit": lambda: Hit(doc=1, title="t")}
    interpreter = Interpreter(tools=tools)
    try:
        assert interpreter.execute("search('cats')") == [
            {"query": "cats", "rank": 0, "tag": "t"},
            {"query": "cats", "rank": 1, "tag": "t"},
        ]
        assert interpreter.execute("r = search(query='dogs', limit=1, tag='x')\nr[0]['tag'], len(r)") == [
            "x",
            1,
        ]
        assert interpreter.execute("stats(1, 2, 3.5, unit='cm')") == {
            "n": 3,
            "sum": 6.5,
            "options": {"unit": "cm"},
        }
        assert interpreter.execute("box()") == {"width": 2, "height": 3}
        assert interpreter.execute("hit()['title']") == "t"
        with pytest.raises(CodeExecutionError, match=r"search\(\): missing a required argument: 'query'"):
            interpreter.execute("search()")
        assert interpreter.execute("import inspect\nstr(inspect.signature(search))").startswith("(query: str")
    finally:
        interpreter.shutdown()


def test_a_coroutine_tool_runs_to_its_end_and_sees_the_callers_context_variables() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")

    async def read_marker() -> str:
        await asyncio.sleep(0)
        return marker.get()

    interpreter = Interpreter(tools={"fetch": fetch, "read_marker": read_marker})
    token = marker.set("the caller's")
    try:
        assert interpreter.execute("fetch('abc')") == {"key": "abc", "value": "cba"}
        assert interpreter.execute("read_marker()") == "the caller's"
    finally:
        marker.reset(token)
        interpreter.shutdown()


def test_a_failing_tool_is_a_runtime_error_in_the_code_and_the_tools_can_change() -> None:
    def broken(x: int) -> str:
        raise ValueError(f"bad value: {x}")

    interpreter = Interpreter(tools={"broken": broken})
    try:
        caught = "try:\n    broken(7)\nexcept RuntimeError as e:\n    message = str(e)\nmessage"
        assert interpreter.execute(caught) == "ValueError: bad value: 7"
        with pytest.raises(CodeExecutionError, match="ValueError: bad value: 8"):
            interpreter.execute("broken(8)")
        interpreter.tools["added"] = lambda: "new"  # dspy.RLM mutates the dict between calls
        assert interpreter.execute("added()") == "new"
        del interpreter.tools["broken"]
        assert interpreter.execute("'broken' in globals()") is False
    finally:
        interpreter.shutdown()


def test_requests_forged_past_the_stubs_are_refused_by_the_host() -> None:
    """Code that digs out the worker's own bridge can ask for nothing but the tools DSPy gave."""
    interpreter = Interpreter(tools={"echo": lambda value: value})
    forge = (
        "import gc\n"
        "from rlmx.sandbox.worker import Worker\n"
        "worker = next(o for o in gc.get_objects() if isinstance(o, Worker))\n"
        "answers = []\n"
        "for method, params in [('llm_query', {'prompt': 'x', 'model': None}),\n"
        "                       ('tool', {'name': 'os_system', 'args': [], 'kwargs': {}})]:\n"
        "    try:\n"
        "        answers.append(worker.rpc(method, params))\n"
        "    except RuntimeError as exc:\n"
        "        answers.append(str(exc))\n"
        "answers"
    )
    try:
        answers = interpreter.execute(forge)
        assert interpreter.execute("echo(5)") == 5
    finally:
        interpreter.shutdown()
    assert answers[0] == "CodeInterpreterError: llm_query is not offered here; only the tools are"
    assert answers[1] == "CodeInterpreterError: Unknown tool: os_system"


def test_a_tool_cannot_run_code_in_its_own_interpreter() -> None:
    holder: dict[str, Interpreter] = {}
    interpreter = Interpreter(tools={"again": lambda: holder["it"].execute("1")})
    holder["it"] = interpreter
    try:
        with pytest.raises(CodeExecutionError, match="cannot execute recursively"):
            interpreter.execute("again()")
        assert interpreter.execute("2 + 2") == 4
    finally:
        interpreter.shutdown()


def test_bad_names_are_refused_before_the_worker_starts() -> None:
    with pytest.raises(ValueError, match="Invalid tool name: 'not-valid'"):
        Interpreter(tools={"not-valid": print})
    interpreter = Interpreter()
    try:
        for variables in ({"class": 1}, {"SUBMIT": 1}, {"bad name": 1}):
            with pytest.raises(CodeInterpreterError, match="Invalid variable name"):
                interpreter.execute("1", variables)
        assert interpreter._sandbox is None
        with pytest.raises(CodeInterpreterError, match="Unsupported value type: object"):
            interpreter.execute("1", {"x": object()})
    finally:
        interpreter.shutdown()


# --- variables ---------------------------------------------------------------------------------------


def test_variables_are_values_not_source_code(interp: Interpreter) -> None:
    tricky = "quote ' and \"\"\" and \\ and\nnewline; __import__('os').system('x') é 漢"
    values = {
        "text": tricky,
        "nested": {"tags": {3, 1, 2}, "point": (1, 2), "hit": Hit(doc=1, title="x")},
        "numbers": [math.inf, -math.inf, 1.5],
        "nothing": None,
    }
    code = "text, nested, numbers[:2] == [float('inf'), float('-inf')], numbers[2], nothing"
    assert interp.execute(code, values) == [
        tricky,
        {"tags": [1, 2, 3], "point": [1, 2], "hit": {"doc": 1, "title": "x"}},
        True,
        1.5,
        None,
    ]
    assert interp.execute("math_ok = numbers[0] > 1e308\nmath_ok", {"numbers": [math.nan, 0]}) is False


def test_a_large_variable_arrives_whole_and_is_sent_once(interp: Interpreter) -> None:
    doc = "".join(f"line {i:07d} of the document\n" for i in range(1_500_000))  # about 40 MB
    assert len(doc) > 40_000_000
    digest = "import hashlib\nhashlib.sha256(doc.encode()).hexdigest()"
    assert interp.execute(digest, {"doc": doc}) == hashlib.sha256(doc.encode()).hexdigest()
    assert interp.execute("doc = doc[:10]\nlen(doc)", {"doc": doc}) == 10
    assert interp._sent["doc"] is doc  # the same str again: bound from the worker's copy, not re-sent
    assert interp.execute("len(doc), doc[-9:]", {"doc": doc}) == [len(doc), "document\n"]


# --- isolation ---------------------------------------------------------------------------------------


def test_model_code_reaches_no_network() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    interpreter = Interpreter()
    try:
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    outcome = 'connected'\n"
            "except OSError as exc:\n"
            "    outcome = type(exc).__name__\n"
            "outcome"
        )
        assert interpreter.execute(code) != "connected"
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
        assert interpreter.execute("import os\nos.path.exists(os.path.expanduser('~/.ssh'))") is False
    finally:
        interpreter.shutdown()
        listener.close()


@pytest.mark.parametrize("backend", ["process-namespaces", "process-landlock"])
def test_each_isolation_layer_runs_the_bare_worker_and_refuses_sockets(backend: str) -> None:
    interpreter = Interpreter(tools={"echo": lambda value: value}, sandbox=SandboxSettings(backend=backend))
    try:
        try:
            interpreter.start()
        except CodeInterpreterError as exc:  # the kernel cannot build this layer (as tests/sandbox say)
            pytest.skip(f"{backend} is not available on this host: {exc}")
        assert interpreter._sandbox is not None
        assert interpreter._sandbox.isolation()["layer"] == backend.removeprefix("process-")
        assert interpreter.execute("echo(2) + len(doc)", {"doc": "abc"}) == 5
        code = "import socket\ntry:\n    socket.socket()\n    r = 'made'\nexcept OSError as e:\n    r = str(e)\nr"
        assert interpreter.execute(code) != "made"
    finally:
        interpreter.shutdown()


def test_interpreters_run_side_by_side_from_threads() -> None:
    """DSPy may call a factory concurrently (dspy.Parallel): each interpreter keeps its own state."""
    from concurrent.futures import ThreadPoolExecutor

    def session(n: int) -> list[Any]:
        with Interpreter(tools={"echo": lambda value: value}) as interpreter:
            interpreter.execute("seen = []")
            return [interpreter.execute(f"seen.append(echo({n}) * {i})\nlist(seen)") for i in range(1, 4)][-1]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(session, range(4)))
    assert results == [[n, 2 * n, 3 * n] for n in range(4)]


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def test_close_runtime_stops_the_shared_zygotes_and_the_next_interpreter_starts_anew() -> None:
    from rlmx.integrations.dspy import close_runtime

    close_runtime()
    before = _descendants(os.getpid())
    with Interpreter() as interpreter:
        assert interpreter.execute("1 + 1") == 2
    assert _descendants(os.getpid()) - before  # the zygote outlives the interpreter, for the next one
    close_runtime()
    assert _descendants(os.getpid()) - before == set()
    with Interpreter() as interpreter:
        assert interpreter.execute("2 + 2") == 4


def test_a_request_the_worker_turns_down_is_a_refusal_and_the_session_goes_on() -> None:
    from rlmx.errors import SandboxRefused
    from rlmx.integrations.dspy.runtime import runtime

    with Interpreter() as interpreter:
        assert interpreter._sandbox is not None
        with pytest.raises(SandboxRefused, match="no value of 'nope' was kept"):
            runtime().run(interpreter._sandbox.assign("nope", None))  # "bind again" with nothing sent
        assert interpreter.execute("1 + 1") == 2
