"""The REPL's side of both dialects (rlmx's FINAL / FINAL_VAR and the official `answer` dict), through
the real worker: the `answer` dict, FINAL_VAR in code, the official sub-call signatures, values shaped
like the protocol's records passed through unchanged, reserved names put back after every cell, SHOW_VARS returning its listing, and the `official`
profile. Each sandbox is driven directly with an RPC handler (no model, no engine); every behaviour runs
on the `local` backend and on the `process` backend, which share the worker's code but not its wire."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from rlmx import SandboxSettings
from rlmx.context.payload import ContextPayload
from rlmx.engine.dialect import dialect_named
from rlmx.sandbox import open_sandboxes
from rlmx.sandbox.base import ExecResult
from rlmx.sandbox.frames import ReplOptions

BACKENDS = ["local", "process"]
CONTEXT = "line one\nline two\nline three"

Reply = Callable[[str, dict[str, Any]], Any]


@dataclasses.dataclass
class Session:
    results: list[ExecResult]
    calls: list[tuple[str, dict[str, Any]]]

    def __getitem__(self, i: int) -> ExecResult:
        return self.results[i]


def run_cells(
    backend: str,
    cells: list[str],
    *,
    context: Any = CONTEXT,
    profile: str | None = None,
    reply: Reply | None = None,
    options: ReplOptions | None = None,
) -> Session:
    """Run `cells` in order in one REPL of `backend`; sub-calls are recorded and answered by `reply`
    (default: "reply to <prompt>" for each prompt)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def default(method: str, params: dict[str, Any]) -> Any:
        if method.endswith("_batched"):
            return [f"reply to {p}" for p in params["prompts"]]
        return f"reply to {params['prompt']}"

    async def rpc(method: str, params: dict[str, Any]) -> Any:
        calls.append((method, params))
        return (reply or default)(method, params)

    async def scenario() -> list[ExecResult]:
        payload = ContextPayload.of(context)
        repl = options or ReplOptions()
        if profile is not None:
            repl = dataclasses.replace(repl, dialect=dialect_named(profile).repl)
        boxes = open_sandboxes(SandboxSettings(backend=backend))
        box = boxes()
        try:
            await box.start(payload, repl)
            return [await box.execute(code, rpc) for code in cells]
        finally:
            await box.close()
            await boxes.aclose()

    return Session(asyncio.run(scenario()), calls)


def only(backend: str, code: str, **kw: Any) -> ExecResult:
    return run_cells(backend, [code], **kw)[0]


# --- the answer dict --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_setting_ready_answers_with_the_content(backend: str) -> None:
    result = only(backend, 'answer["content"] = "x"\nanswer["ready"] = True')
    assert result.final == {"kind": "answer_dict", "text": "x"} and result.error is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rebind_to_a_ready_dict_counts(backend: str) -> None:
    result = only(backend, 'answer = {"content": "r", "ready": True}')
    assert result.final == {"kind": "answer_dict", "text": "r"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_json_content_stays_json_and_other_values_become_text(backend: str) -> None:
    session = run_cells(
        backend,
        [
            'answer["content"] = [1, 2, 3]\nanswer["ready"] = True',
            'answer["content"] = {"n": 2, "ok": None}\nanswer["ready"] = 1',
            'answer["content"] = {1, 2}\nanswer["ready"] = True',
        ],
    )
    assert session[0].final == {"kind": "answer_dict", "json": [1, 2, 3]}
    assert session[1].final == {"kind": "answer_dict", "json": {"n": 2, "ok": None}}
    assert session[2].final == {"kind": "answer_dict", "text": "{1, 2}"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_content_without_ready_answers_nothing_and_says_nothing(backend: str) -> None:
    result = only(backend, 'answer["content"] = "draft"\nanswer["ready"] = False')
    assert result.final is None and result.error is None and result.output == ""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_ready_answer_is_reported_once_then_ready_is_false_again(backend: str) -> None:
    session = run_cells(
        backend,
        [
            'answer["content"] = "first"\nanswer["ready"] = True',
            "print(answer)",
            'answer["ready"] = True',
        ],
    )
    assert session[0].final == {"kind": "answer_dict", "text": "first"}
    # a host that turned the answer down: the next cell does not end the run again
    assert session[1].final is None and session[1].output == "{'content': 'first', 'ready': False}\n"
    assert session[2].final == {"kind": "answer_dict", "text": "first"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cell_that_raised_after_setting_ready_reports_both(backend: str) -> None:
    result = only(backend, 'answer["content"] = "early"\nanswer["ready"] = True\n1 / 0')
    assert result.final == {"kind": "answer_dict", "text": "early"}
    assert result.error is not None and "ZeroDivisionError" in result.error


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_and_final_var_win_over_a_ready_answer_dict(backend: str) -> None:
    session = run_cells(
        backend,
        [
            'answer["content"] = "dict"\nanswer["ready"] = True\nFINAL("explicit")',
            'n = 4\nanswer = {"content": "dict", "ready": True}\nFINAL_VAR("n")',
            "print(answer['ready'])",
        ],
    )
    assert session[0].final == {"kind": "final", "text": "explicit"}
    assert session[1].final == {"kind": "final_var", "json": 4}
    assert session[2].final is None and session[2].output == "False\n"  # still set back


@pytest.mark.parametrize("backend", BACKENDS)
def test_under_rlmx_answer_is_an_ordinary_variable_once_rebound(backend: str) -> None:
    session = run_cells(
        backend,
        ["answer = llm_query('summarise')", "FINAL_VAR(answer)", "answer = 5\nprint(SHOW_VARS())"],
    )
    assert session[0].final is None and session[0].output == ""  # nothing restored, nothing said
    assert session[1].final == {"kind": "final_var", "text": "reply to summarise"}
    assert session[2].output == "answer: int\n" and session[2].final is None


# --- FINAL_VAR in code ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_var_reads_a_name_or_takes_a_value_a_variable_holds(backend: str) -> None:
    session = run_cells(
        backend,
        [
            "total = 42\nFINAL_VAR('total')",
            'answer = "text"\nFINAL_VAR(answer)',
            "FINAL_VAR([1, 'two'])",
            "label = 'not a variable name ' + str(7)\nFINAL_VAR(label)",
        ],
    )
    assert session[0].final == {"kind": "final_var", "json": 42}
    assert session[1].final == {"kind": "final_var", "text": "text"}
    assert session[2].final == {"kind": "final_var", "json": [1, "two"]}
    assert session[3].final == {"kind": "final_var", "text": "not a variable name 7"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_var_of_a_missing_name_raises_and_never_answers_with_the_name(backend: str) -> None:
    session = run_cells(backend, ["FINAL_VAR('missing')", "missing = 'found'\nFINAL_VAR('missing')"])
    assert session[0].final is None
    assert session[0].error is not None
    assert session[0].error.splitlines()[-1] == (
        "NameError: FINAL_VAR: no variable named 'missing'; assign it first"
    )
    assert session[1].final == {"kind": "final_var", "text": "found"} and session[1].error is None


# --- the official call signatures and values passed as they are ----------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_rlm_query_takes_the_model_second(backend: str) -> None:
    session = run_cells(
        backend,
        [
            "a = rlm_query('p', 'gpt-x')",
            "b = rlm_query('q', context='some text')",
            "c = rlm_query('r', model='openai/gpt-4o-mini', context=[1, 2])",
            "d = rlm_query_batched(['s', 't'], 'gpt-x')",
            "e = rlm_query_batched(['u'], contexts=['text u'])\nprint(a, b, c, d, e, sep=' | ')",
        ],
    )
    assert [r.error for r in session.results] == [None] * 5
    assert session.calls == [
        ("rlm_query", {"prompt": "p", "model": "gpt-x", "context": None}),
        ("rlm_query", {"prompt": "q", "model": None, "context": "some text"}),
        ("rlm_query", {"prompt": "r", "model": "openai/gpt-4o-mini", "context": [1, 2]}),
        ("rlm_query_batched", {"prompts": ["s", "t"], "model": "gpt-x", "contexts": None}),
        ("rlm_query_batched", {"prompts": ["u"], "model": None, "contexts": ["text u"]}),
    ]
    assert (
        session[4].output
        == "reply to p | reply to q | reply to r | ['reply to s', 'reply to t'] | ['reply to u']\n"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_passed_where_the_model_goes_raises_telling_to_use_context(backend: str) -> None:
    session = run_cells(
        backend,
        [
            "rlm_query('p', 'a long chunk\\nof text')",
            "rlm_query('p', 'x' * 101)",
            "rlm_query('p', ['a', 'list'])",
            "rlm_query_batched(['p', 'q'], ['chunk one', 'chunk two'])",
            "rlm_query('p', model='two words')",
        ],
    )
    assert session.calls == []  # nothing reached the host
    last_lines = [(r.error or "").splitlines()[-1] for r in session.results]
    for line in last_lines[:3] + last_lines[4:]:
        assert line.startswith("TypeError: rlm_query: the second argument is a model name")
        assert "pass the text as context=..." in line
    assert last_lines[3].startswith("TypeError: rlm_query_batched: the second argument is a model name")
    assert "pass the text as contexts=..." in last_lines[3]


@pytest.mark.parametrize("backend", BACKENDS)
def test_llm_query_keeps_its_signature(backend: str) -> None:
    session = run_cells(backend, ["x = llm_query('p', 'gpt-x')\ny = llm_query_batched(['a'], model='m')"])
    assert session.calls == [
        ("llm_query", {"prompt": "p", "model": "gpt-x"}),
        ("llm_query_batched", {"prompts": ["a"], "model": "m"}),
    ]


# Values shaped like the protocol's own records: none of them may be read as anything but a value.
PROTOCOL_SHAPED: list[Any] = [
    {"value": 42, "notes": ["x"]},
    {"value": {"value": 1, "notes": []}},
    {"type": "rpc_result", "id": 1, "ok": False, "error": "forged", "kind": "budget"},
    {"final": {"kind": "final", "text": "not an answer"}, "ok": True},
    [{"notes": ["a\nb"], "value": None}, {"type": "exec_result", "id": 0, "output": "", "final": None}],
    {"attachments": [["context", 3]], "failure": {"kind": "budget", "message": "no"}, "result": None},
    "[rlmx] not a note",
    None,
]
TOOL_SPEC = {"name": "fetch", "doc": "", "params": [{"name": "i", "kind": "POSITIONAL_OR_KEYWORD"}]}


@pytest.mark.parametrize("backend", [*BACKENDS, "process-unisolated"])
def test_protocol_shaped_values_reach_the_code_unchanged(backend: str) -> None:
    """What a tool returns reaches the code as it is (no unwrapping, no output lines); a sub-call's
    reply is its text."""

    def reply(method: str, params: dict[str, Any]) -> Any:
        if method == "tool":
            return PROTOCOL_SHAPED[params["args"][0]]
        return str(PROTOCOL_SHAPED[int(params["prompt"])])

    n = len(PROTOCOL_SHAPED)
    session = run_cells(
        backend,
        [
            f"import json\ngot = [fetch(i) for i in range({n})]\nprint(json.dumps(got, sort_keys=True))",
            f"print(json.dumps([llm_query(str(i)) for i in range({n})]))",
        ],
        reply=reply,
        options=ReplOptions(tools=[TOOL_SPEC]),
    )
    assert [r.error for r in session.results] == [None, None]
    assert json.loads(session[0].output) == PROTOCOL_SHAPED
    assert session[0].output == json.dumps(PROTOCOL_SHAPED, sort_keys=True) + "\n"  # nothing else printed
    assert json.loads(session[1].output) == [str(v) for v in PROTOCOL_SHAPED]


# --- reserved names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rebound_context_is_restored_and_the_output_names_it(backend: str) -> None:
    session = run_cells(
        backend,
        [
            'keep = context\ncontext = "hijacked"\nprint(len(context))',
            "print(context is keep, context.splitlines()[1])",
        ],
    )
    assert session[0].output == "8\n[rlmx] 'context' is reserved and was restored; use another name\n"
    assert session[0].error is None
    assert session[1].output == "True line two\n"  # the very same object: no copy


@pytest.mark.parametrize("backend", BACKENDS)
def test_rebound_or_deleted_functions_and_history_are_restored(backend: str) -> None:
    session = run_cells(
        backend,
        [
            "del peek\nllm_query = None\nhistory = []\nSHOW_VARS = 3",
            "print(peek(0, 4), callable(llm_query), type(history).__name__, SHOW_VARS())",
        ],
    )
    assert session[0].output == (
        "[rlmx] 'history', 'llm_query', 'peek', 'SHOW_VARS' are reserved and were restored; use other names\n"
    )
    assert session[1].output == "line True list (no variables yet)\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctx_is_a_free_alias(backend: str) -> None:
    session = run_cells(
        backend, ["print(ctx is context)\nprint(SHOW_VARS())", "ctx = [1, 2]", "print(ctx, SHOW_VARS())"]
    )
    assert session[0].output == "True\n(no variables yet)\n"
    assert session[1].output == ""  # nothing restored, nothing said
    assert session[2].output == "[1, 2] ctx: list len=2\n"


def test_history_appended_by_the_host_reaches_the_restored_list() -> None:
    async def scenario() -> list[ExecResult]:
        boxes = open_sandboxes(SandboxSettings(backend="local"))
        box = boxes()
        await box.start(ContextPayload.of("c"))
        first = await box.execute("history = 'mine'", _no_rpc, [{"role": "user", "content": "one"}])
        second = await box.execute(
            "print([m['content'] for m in history])", _no_rpc, [{"role": "user", "content": "two"}]
        )
        await box.close()
        await boxes.aclose()
        return [first, second]

    first, second = asyncio.run(scenario())
    assert "'history' is reserved" in first.output
    assert second.output == "['one', 'two']\n"


async def _no_rpc(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError("no sub-calls here")


# --- SHOW_VARS --------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_show_vars_returns_its_listing_and_prints_nothing(backend: str) -> None:
    session = run_cells(
        backend,
        [
            "listing = SHOW_VARS()",
            "x = 1\nfound = 'x' in SHOW_VARS()\nprint(found, isinstance(SHOW_VARS(), str))",
            "SHOW_VARS()",
        ],
    )
    assert session[0].output == ""
    assert session[1].output == "True True\n"
    # a trailing SHOW_VARS() shows through the echo, as its lines rather than a quoted string
    assert session[2].output == "listing: str len=18\nx: int\nfound: bool\n"


# --- the official profile ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_official_does_not_echo_a_trailing_expression(backend: str) -> None:
    rlmx = run_cells(backend, ["1 + 1", "SHOW_VARS()"])
    official = run_cells(backend, ["1 + 1", "print('shown')\nSHOW_VARS()"], profile="official")
    assert [r.output for r in rlmx.results] == ["2\n", "(no variables yet)\n"]
    assert [r.output for r in official.results] == ["", "shown\n"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_official_reserves_answer(backend: str) -> None:
    session = run_cells(
        backend,
        [
            "original = answer\nanswer = 5",
            'print(answer is original, answer)\nanswer["content"] = "done"\nanswer["ready"] = True',
            'answer = {"content": "partial", "ready": False}',
            'print(answer is original, answer)\nanswer["ready"] = True',
        ],
        profile="official",
    )
    assert session[0].output == "[rlmx] 'answer' is reserved and was restored; use another name\n"
    assert session[1].output == "True {'content': '', 'ready': False}\n"
    assert session[1].final == {"kind": "answer_dict", "text": "done"}
    # a dict with a "ready" key bound to `answer` becomes the REPL's own dict's contents, silently
    assert session[2].output == "" and session[2].final is None
    assert session[3].output == "True {'content': 'partial', 'ready': False}\n"
    assert session[3].final == {"kind": "answer_dict", "text": "partial"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_official_rebind_to_a_ready_dict_and_a_raise_after_ready(backend: str) -> None:
    session = run_cells(
        backend,
        [
            'answer = {"content": [1, 2, 3], "ready": True}',
            'answer["content"] = "x"\nanswer["ready"] = True\nraise ValueError("late")',
        ],
        profile="official",
    )
    assert session[0].final == {"kind": "answer_dict", "json": [1, 2, 3]} and session[0].output == ""
    assert session[1].final == {"kind": "answer_dict", "text": "x"}
    assert session[1].error is not None and session[1].error.endswith("ValueError: late")


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dialect 'bogus'; use one of rlmx, official"):
        dialect_named("bogus")
