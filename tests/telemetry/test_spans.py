"""A run's spans through the OpenTelemetry API into the application's provider (the SDK's in-memory
exporter here): the span tree mirrors the trace tree, the GenAI attributes, token totals equal to the
ledger's, no context text, text only on opt-in, nothing at all without a provider."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from span_tree import Span, check_mirrors, from_sdk, token_totals

from observability_runs import depth2_policy, run_depth2
from policies import repl
from rlmx import RLM, Limits, ModelOptions
from rlmx.telemetry import SEMCONV_VERSION, active, run_sinks
from rlmx.testing import ScriptedModel, ScriptedServer
from rlmx.trace import read_records
from rlmx.trace.events import Event, from_record

MARKER = "ZQX-CONTEXT-MARKER-7731"


def depth2(tmp_path: Path, exporter: Any, context: str | None = None) -> tuple[Any, list[Event], list[Span]]:
    path = tmp_path / "run.jsonl"
    with ScriptedServer(depth2_policy) as srv:
        if context is None:
            result = run_depth2(srv, path)
        else:
            from observability_runs import SCRIPTED, scripted_pricing

            rlm = RLM(
                SCRIPTED,
                model_options=ModelOptions(base_url=srv.url),
                limits=Limits(max_depth=2),
                trace=path,
                pricer=scripted_pricing(),
            )
            result = rlm.run("What do the children find?", context)
    assert result.stopped_by == "final", result.error
    events = [from_record(r) for r in read_records(path)]
    return result, events, from_sdk(exporter.get_finished_spans())


def test_the_span_tree_mirrors_the_trace_tree(tmp_path: Path, exporter: Any) -> None:
    _, events, spans = depth2(tmp_path, exporter)
    run = check_mirrors(spans, events)
    children = [s for s in spans if s.name == "invoke_agent rlmx.child"]
    assert len(children) == 2 and {s.attributes["rlmx.depth"] for s in children} == {1}
    assert run.attributes["rlmx.stop_reason"] == "final"
    assert run.attributes["rlmx.trace_path"] == str(tmp_path / "run.jsonl")
    assert run.attributes["rlmx.run_id"] == run.attributes["rlmx.trace_id"]


def test_token_totals_and_cost_equal_the_ledger(tmp_path: Path, exporter: Any) -> None:
    result, _, spans = depth2(tmp_path, exporter)
    totals = token_totals(spans)
    assert totals == {
        "input_tokens": result.usage["input_tokens"],
        "output_tokens": result.usage["output_tokens"],
    }
    run = next(s for s in spans if s.name == "invoke_agent rlmx")
    assert run.attributes["rlmx.usage.input_tokens"] == result.usage["input_tokens"]
    assert run.attributes["rlmx.usage.calls"] == result.usage["calls"]
    assert run.attributes["rlmx.cost_usd"] == pytest.approx(result.usage["cost_usd"])
    costs = sum(float(s.attributes.get("rlmx.cost_usd", 0)) for s in spans if s.name.startswith("chat "))
    assert costs == pytest.approx(result.usage["cost_usd"])


def test_gen_ai_attributes_of_the_pinned_conventions(tmp_path: Path, exporter: Any) -> None:
    _, _, spans = depth2(tmp_path, exporter)
    assert SEMCONV_VERSION == "1.37.0"
    scopes = {
        (s.instrumentation_scope.name, s.instrumentation_scope.schema_url)
        for s in exporter.get_finished_spans()
    }
    assert scopes == {("rlmx", "https://opentelemetry.io/schemas/1.37.0")}
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert chats and all(s.kind == "CLIENT" for s in chats)
    for s in chats:
        assert s.name == "chat scripted"
        assert s.attributes["gen_ai.operation.name"] == "chat"
        assert s.attributes["gen_ai.provider.name"] == "openai"
        assert s.attributes["gen_ai.request.model"] == "scripted"
        assert s.attributes["gen_ai.usage.output_tokens"] > 0
        assert tuple(s.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
        assert s.attributes["rlmx.purpose"] in {"root", "child_root", "llm_query", "fallback"}
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    assert {s.attributes["gen_ai.operation.name"] for s in agents} == {"invoke_agent"}
    assert {s.attributes["gen_ai.agent.name"] for s in agents} == {"rlmx", "rlmx.child"}


def leaky_run(tmp_path: Path, context: str) -> tuple[list[Event], Any]:
    """A run whose code prints the context's start, sends it to a sub-call, a child RLM and a tool, and
    answers with it: every place text could leak from."""

    def echo(text: str) -> str:
        """Echo the text."""
        return text

    code = (
        "head = context[:60]\nprint(head)\nsub = llm_query('summarise ' + head)\n"
        "kid = rlm_query('look at ' + head)\nprint(echo(head), sub, kid)"
    )
    model = ScriptedModel(
        root=[repl(code), "FINAL_VAR(head)"], child=[repl("print(context[:30])"), "FINAL(child done)"]
    )
    path = tmp_path / "leaky.jsonl"
    rlm = RLM(model.lm(), trace=path, tools={"echo": echo}, limits=Limits(max_depth=2))
    result = rlm.run("What is here?", context)
    assert result.stopped_by == "final", result.error
    return [from_record(r) for r in read_records(path)], result


def test_no_context_text_in_any_span(tmp_path: Path, exporter: Any) -> None:
    """Code prints the context, sends it to a sub-call, a child and a tool and answers with it; without
    the opt-in no text of it reaches a span."""
    events, result = leaky_run(tmp_path, f"{MARKER} " + "lorem ipsum " * 50)
    assert MARKER in str(result.answer)
    assert sum(MARKER in json.dumps(e.to_record()) for e in events) >= 4  # the trace has it: this can fail
    spans = from_sdk(exporter.get_finished_spans())
    check_mirrors(spans, events)
    assert {"execute_tool echo", "invoke_agent rlmx.child"} <= {s.name for s in spans}
    assert spans and not [s.name for s in spans if MARKER in s.text()]
    assert not [s.name for s in spans if "gen_ai.input.messages" in s.attributes]


def test_prompt_and_reply_text_only_on_opt_in(
    tmp_path: Path, exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    context = "lorem ipsum " * 400 + MARKER + " lorem ipsum" * 400  # never printed by the scripted code
    _, _, spans = depth2(tmp_path, exporter, context=context)
    run = next(s for s in spans if s.name == "invoke_agent rlmx")
    assert run.attributes["rlmx.question"] == "What do the children find?"
    root_call = next(s for s in spans if s.attributes.get("rlmx.purpose") == "root")
    messages = json.loads(root_call.attributes["gen_ai.input.messages"])
    assert {m["role"] for m in messages} >= {"system", "user"}
    assert messages[0]["parts"][0]["type"] == "text"
    reply = json.loads(root_call.attributes["gen_ai.output.messages"])
    assert reply[0]["role"] == "assistant" and "llm_query_batched" in reply[0]["parts"][0]["content"]
    assert not [s.name for s in spans if MARKER in s.text()]


def test_the_run_span_joins_the_applications_current_span(tmp_path: Path, exporter: Any) -> None:
    from opentelemetry import trace

    model = ScriptedModel(root=["FINAL(ok)"])
    with trace.get_tracer("app").start_as_current_span("app request") as app_span:
        RLM(model.lm(), trace=False).run("q", "some context")
    spans = from_sdk(exporter.get_finished_spans())
    app = next(s for s in spans if s.name == "app request")
    run = next(s for s in spans if s.name == "invoke_agent rlmx")
    assert run.parent_id == app.span_id and run.trace_id == app.trace_id
    assert f"{app_span.get_span_context().span_id:016x}" == app.span_id


def test_tool_calls_are_spans_under_their_cell(tmp_path: Path, exporter: Any) -> None:
    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    def fails(x: int) -> int:
        """Always fails."""
        raise ValueError("no")

    code = "print(lookup('abc'))\ntry:\n    fails(1)\nexcept Exception as exc:\n    print('caught', exc)"
    model = ScriptedModel(root=[repl(code), "FINAL(done)"])
    path = tmp_path / "tools.jsonl"
    RLM(model.lm(), trace=path, tools={"lookup": lookup, "fails": fails}).run("q", "some context")
    events = [from_record(r) for r in read_records(path)]
    spans = from_sdk(exporter.get_finished_spans())
    check_mirrors(spans, events)
    ok = next(s for s in spans if s.name == "execute_tool lookup")
    bad = next(s for s in spans if s.name == "execute_tool fails")
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "lookup" and ok.status == "UNSET"
    assert bad.status == "ERROR" and bad.attributes["error.type"] == "tool_error"
    assert "gen_ai.tool.call.arguments" not in ok.attributes  # text only on opt-in


def test_a_failed_run_marks_its_span(exporter: Any) -> None:
    from rlmx.testing import FunctionLM

    def broken(messages: Any, settings: Any) -> str:
        raise RuntimeError("provider down")

    result = RLM(FunctionLM(broken, name="broken"), trace=False).run("q", "some context")
    assert result.stopped_by == "error"
    spans = from_sdk(exporter.get_finished_spans())
    run = next(s for s in spans if s.name == "invoke_agent rlmx")
    assert run.status == "ERROR" and run.attributes["rlmx.stop_reason"] == "error"
    assert [s.status for s in spans if s.name.startswith("chat ")] == ["ERROR"]


def test_without_a_tracer_provider_a_run_gets_no_sink() -> None:
    assert not active()
    assert run_sinks() == []
    model = ScriptedModel(root=["FINAL(ok)"])
    assert RLM(model.lm(), trace=False).run("q", "ctx").answer == "ok"


def test_without_the_opentelemetry_package_runs_work(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `import opentelemetry` raises ImportError
    assert not active() and run_sinks() == []
    model = ScriptedModel(root=["FINAL(ok)"])
    assert RLM(model.lm(), trace=False).run("q", "ctx").answer == "ok"


def test_the_finish_reason_the_provider_reports_is_recorded(tmp_path: Path, exporter: Any) -> None:
    from rlmx.testing import Reply

    def policy(messages: Any, request: Any) -> Any:
        return Reply("FINAL(cut short)", finish_reason="length")

    path = tmp_path / "run.jsonl"
    with ScriptedServer(policy) as srv:
        RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), trace=path).run("q", "ctx")
    calls = [r for r in read_records(path) if r["type"] == "lm_call"]
    assert [r["finish_reason"] for r in calls] == ["length"]
    (chat,) = [s for s in from_sdk(exporter.get_finished_spans()) if s.name.startswith("chat ")]
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("length",)


def test_a_sessions_questions_are_runs_under_the_callers_span(exporter: Any) -> None:
    from opentelemetry import trace

    model = ScriptedModel(root=["FINAL(ok)"])
    with (
        trace.get_tracer("app").start_as_current_span("conversation"),
        RLM(model.lm(), trace=False).session() as s,
    ):
        s.ask("first question", "ctx one")
        s.ask("second question")
        sid = s.id
    spans = from_sdk(exporter.get_finished_spans())
    app = next(x for x in spans if x.name == "conversation")
    runs = [x for x in spans if x.name == "invoke_agent rlmx"]
    assert len(runs) == 2
    assert {r.parent_id for r in runs} == {app.span_id}
    assert {r.attributes["gen_ai.conversation.id"] for r in runs} == {sid}


def test_spans_left_open_by_a_run_without_run_end_are_ended(exporter: Any) -> None:
    from rlmx.telemetry.spans import SpanSink
    from rlmx.trace.events import ExecStart, LMCall, RunStart

    sink = SpanSink()
    now = time.time()
    sink(RunStart(id="e1", run_id="r1", model="openai:m", t=now))
    sink(LMCall(id="e2", parent_id="e1", model="openai:m", iteration=1, t=now + 0.1, duration_s=0.05))
    sink(ExecStart(id="e3", parent_id="e1", exec_id="e4", iteration=1, t=now + 0.2))
    assert {s.name for s in exporter.get_finished_spans()} == {"chat m"}
    sink.end_open_spans()
    spans = from_sdk(exporter.get_finished_spans())
    assert sorted(s.name for s in spans) == ["chat m", "invoke_agent rlmx", "rlmx cell", "rlmx turn"]
    run = next(s for s in spans if s.name == "invoke_agent rlmx")
    assert run.status == "ERROR" and run.attributes["rlmx.stop_reason"] == "error"
    sink.end_open_spans()  # once only
    assert len(exporter.get_finished_spans()) == 4
