"""Typed answers through the scripted model server: the schema is shown, answers are validated and parsed,
rejected answers go back to the model, and retries are bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from policies import is_child, is_rlm, last_user, repl, turn
from rlmx import RLM, Limits, ModelOptions
from rlmx.errors import ConfigError
from rlmx.testing import ScriptedModel, ScriptedServer
from rlmx.typed import OutputSpec


class Tally(BaseModel):
    label: str
    count: int


def make_rlm(srv: ScriptedServer, **kw: Any) -> RLM:
    return RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), **kw)


def replay(*turns: str) -> ScriptedModel:
    """The root replays `turns` (the last repeats); sub-calls say "sub", the forced final FINAL(forced)."""
    return ScriptedModel(root=turns, sub="sub", final="FINAL(forced)")


def records(path: str | None) -> list[dict[str, Any]]:
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_valid_first_try_from_final_var_gives_the_parsed_object() -> None:
    policy = replay(repl("ans = {'label': 'billing', 'count': 7}"), "FINAL_VAR(ans)")
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("how many?", "ctx", output=Tally)
        system = srv.requests[0].messages[0]["content"]
        turns_served = srv.served
    assert result.stopped_by == "final" and result.error is None
    assert result.parsed == Tally(label="billing", count=7)
    assert result.answer == {"label": "billing", "count": 7}
    assert turns_served == 2  # no correction round
    assert "## Answer format" in system and '"count"' in system and '"integer"' in system  # schema shown
    start = records(result.trace_path)[0]
    assert start["type"] == "run_start" and start["output_schema"]["title"] == "Tally"


def test_invalid_then_corrected_sends_the_errors_back() -> None:
    policy = replay(
        'Done.\nFINAL({"label": "billing", "count": "many"})',
        'Fixed.\nFINAL({"label": "billing", "count": 12})',
    )
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("how many?", "ctx", output=Tally)
        feedback = last_user(srv.requests[1].messages)
    assert result.stopped_by == "final"
    assert result.parsed == Tally(label="billing", count=12)
    assert "not accepted" in feedback and "$.count" in feedback and "valid integer" in feedback
    assert "2 correction(s) left" in feedback
    rejected = [r for r in records(result.trace_path) if r["type"] == "output_rejected"]
    assert [r["attempt"] for r in rejected] == [1]


def test_invalid_until_retries_run_out_is_a_clear_error_with_the_last_raw_answer() -> None:
    raw = ['FINAL({"label": "x"})', 'FINAL({"label": "x", "count": "a"})', "FINAL(not json at all)"]
    policy = replay(*raw)
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("how many?", "ctx", output=OutputSpec(Tally, max_retries=2))
        served = srv.served
    assert result.stopped_by == "error"
    assert served == 3  # the first answer and two corrections, then no more calls
    assert result.parsed is None
    assert result.answer == "not json at all"  # the last raw answer is kept
    assert result.error is not None
    assert "did not match the output schema 'Tally' after 3 attempt(s)" in result.error
    assert "not valid JSON" in result.error and "last raw answer: not json at all" in result.error
    assert "\n" not in result.error  # one line


def test_json_schema_dict_and_final_called_in_code() -> None:
    schema = {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
        "required": ["ids"],
        "additionalProperties": False,
    }
    policy = replay(repl("FINAL({'ids': [1, 'two']})"), repl("FINAL({'ids': [1, 2]})"))
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("which ids?", "ctx", output=schema)
        feedback = last_user(srv.requests[1].messages)
    assert result.stopped_by == "final" and result.parsed == {"ids": [1, 2]} == result.answer
    assert "at $.ids[1]: 'two' is not of type 'integer'" in feedback


def test_children_answer_freely_only_the_root_is_checked() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        if is_child(request):  # asked "sub task"
            return "FINAL(plain words from the child)"
        if turn(messages) == 0:
            return repl("r = rlm_query('sub task', context='abc')\nprint(r)")
        return 'FINAL({"label": "child said words", "count": 1})'

    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_depth=2)).run("q", "ctx", output=Tally)
        child_system = next(r.messages[0]["content"] for r in srv.requests if is_child(r))
    assert result.stopped_by == "final" and result.parsed == Tally(label="child said words", count=1)
    assert "## Answer format" not in child_system


def test_forced_final_at_a_limit_is_validated_too() -> None:
    policy = replay(repl("x = 1"))  # never finishes; the forced final says FINAL(forced)
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_iterations=2)).run("q", "ctx", output=Tally)
    assert result.stopped_by == "max_iterations"
    assert result.parsed is None and result.answer == "forced"
    assert result.error is not None and "did not match the output schema" in result.error


def test_bad_schemas_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="not a valid JSON schema"):
        OutputSpec({"type": "no-such-type"})
    with pytest.raises(ConfigError, match="neither a JSON schema"):
        OutputSpec(object())


def test_cli_output_schema_prints_the_validated_json(tmp_path: Path) -> None:
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(Tally.model_json_schema()))
    policy = replay('FINAL({"label": "a", "count": "3x"})', 'FINAL({"label": "a", "count": 3})')
    cli = [sys.executable, "-m", "rlmx.cli", "ask", "q", "--model", "openai:scripted"]
    with ScriptedServer(policy) as srv:
        proc = subprocess.run(
            [*cli, "--base-url", srv.url, "--output-schema", str(schema_file), "--quiet", "--no-trace"],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"label": "a", "count": 3}
    missing = subprocess.run(
        [*cli, "--base-url", "http://127.0.0.1:9", "--output-schema", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "cannot read output schema" in missing.stderr
