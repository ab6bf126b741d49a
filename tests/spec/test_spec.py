"""rlmx.spec: a run described once. Its data round-trips through JSON and pickle and never holds a key;
attachments are named in a trace and refused where they would cross processes; `RLM` is built from a
spec, `rlm.spec` reflects assignments and a run reads one snapshot; the translation layer's options."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from rlmx import RLM, Limits, ModelOptions, SandboxSettings
from rlmx.errors import ConfigError
from rlmx.limits import HistorySettings
from rlmx.pricing import Price, Pricing
from rlmx.spec import ModelRef, RunSpec, SpecError
from rlmx.spec.options import RunOptions, build_spec
from rlmx.testing import FunctionLM, ScriptedServer
from rlmx.trace import read_events
from rlmx.trace.events import RunStart

SECRET = "sk-never-anywhere-0123456789"


def shout(text: str) -> str:
    """Upper-case a text (a tool importable by name)."""
    return text.upper()


def full_spec(**changes: Any) -> RunSpec:
    fields: dict[str, Any] = {
        "model": ModelRef("openai:root", ModelOptions(base_url="http://127.0.0.1:9/v1", temperature=0.3)),
        "sub_model": "openai:sub",
        "models_by_depth": {2: "openai:deep"},
        "model_options": ModelOptions(concurrency=7, top_p=0.5),
        "sub_model_options": ModelOptions(reasoning_effort="low"),
        "limits": Limits(max_iterations=5, max_cost_usd=1.5, timeout_s=60),
        "sandbox": SandboxSettings("process-unisolated", cell_timeout_s=9.0),
        "history": HistorySettings(compact_at=0.5),
        "trace": False,
        "excerpt_chars": 0,
        "prompt": "official",
        "system_prompt_append": "Be brief.",
        "tools": {"shout": shout, "limit": 3},
        "sub_tools": ("json:dumps",),
        "output": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "pricer": Pricing({"openai:root": Price(1.0, 2.0)}),
        "prefilter": "bm25:10",
    }
    return RunSpec(**{**fields, **changes})


def test_the_data_round_trips_through_json_unchanged() -> None:
    spec = full_spec()
    data = spec.to_data()
    again = RunSpec.from_data(json.loads(json.dumps(data)))
    assert again.to_data() == data
    assert again.limits == spec.limits and again.sandbox == spec.sandbox and again.history == spec.history
    assert isinstance(again.model, ModelRef) and again.model.options.temperature == 0.3
    assert again.sub_model_options == spec.sub_model_options
    assert again.pricer.overrides == {"openai:root": Price(1.0, 2.0)}
    tool = again.tools["shout"]
    assert tool.fn is shout and again.tools["limit"].fn == 3 and again.sub_tools == ("json:dumps",)


def test_a_spec_pickles_as_its_data() -> None:
    spec = full_spec()
    assert pickle.loads(pickle.dumps(spec)).to_data() == spec.to_data()


def test_a_key_never_enters_the_data_the_record_or_a_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = full_spec(model_options=ModelOptions(api_key=SECRET))
    with pytest.raises(SpecError, match="model_options holds an API key"):
        spec.to_data()
    with pytest.raises(SpecError):
        pickle.dumps(spec)
    secrets: dict[str, str] = {}
    data = spec.to_data(secrets)
    assert SECRET not in json.dumps(data) and SECRET not in json.dumps(spec.record())
    assert list(secrets.values()) == [SECRET]
    (name,) = secrets
    assert data["model_options"]["api_key_env"] == name
    monkeypatch.setenv(name, SECRET)  # where the run executes: the sealed keys unsealed into the environment
    assert RunSpec.from_data(data).model_options.api_key == SECRET
    named = full_spec(model_options=ModelOptions(api_key_env="MY_KEY"))
    monkeypatch.setenv("MY_KEY", SECRET)
    assert named.model_options.api_key is None  # made before the variable was set
    assert RunSpec.from_data(named.to_data()).model_options.api_key == SECRET
    assert SECRET not in repr(ModelOptions(api_key=SECRET))


def test_attachments_are_named_in_the_record_and_refused_in_the_data() -> None:
    lm = FunctionLM(lambda messages, settings: "FINAL(1)", name="fn:model")
    spec = full_spec(model=lm, tools={"inline": lambda x: x}, on_event=[print])
    record = spec.record()
    assert record["model"] == {"attached": "an LM object", "name": "fn:model"}
    assert record["tools"][0]["ref"]["attached"].startswith("a function") and record["on_event"] == 1
    json.dumps(record)
    with pytest.raises(SpecError, match=r"^model is an LM object \(fn:model\)"):
        spec.to_data()
    with pytest.raises(SpecError, match=r"tools\['inline'\] is a function with no importable name"):
        full_spec(tools={"inline": lambda x: x}).to_data()


def test_bad_fields_and_data_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="limits must be a Limits"):
        RunSpec("openai:x", limits={"max_iterations": 3})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown spec field 'max_iterations'"):
        RunSpec("openai:x").replace(max_iterations=3)
    with pytest.raises(ConfigError, match="unknown limit 'max_iter'"):
        RunSpec("openai:x").replace(limits={"max_iter": 3})
    with pytest.raises(SpecError, match="not a run spec's data"):
        RunSpec.from_data({"model": "openai:x"})
    with pytest.raises(SpecError, match="unknown field 'colour'"):
        RunSpec.from_data({**RunSpec("openai:x").to_data(), "colour": "red"})
    assert RunSpec("openai:x").replace(limits={"max_iterations": 3}).limits == Limits(max_iterations=3)


def test_an_rlm_is_built_from_a_spec_and_its_spec_follows_assignments() -> None:
    spec = RunSpec("openai:x", model_options=ModelOptions(base_url="http://127.0.0.1:9/v1"), trace=False)
    rlm = RLM.from_spec(spec)
    assert rlm.spec.to_data() == spec.to_data()
    rlm.limits = Limits(max_iterations=2)
    assert rlm.spec.limits.max_iterations == 2 and spec.limits.max_iterations == 30
    assert isinstance(rlm, RunSpec) and type(rlm.spec) is RunSpec


def test_a_run_reads_one_snapshot_and_records_it_without_the_key(tmp_path: Path) -> None:
    """An assignment made while a run is under way waits for the next run; run_start holds the spec."""
    trace = tmp_path / "run.jsonl"
    replies = iter(["```repl\nx = 1\n```", "FINAL(done)"])
    with ScriptedServer(lambda messages, request: next(replies), models=("scripted", "other")) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url, api_key=SECRET),
            trace=trace,
            sandbox=SandboxSettings("process-unisolated"),
        )

        def switch(event: Any) -> None:
            if isinstance(event, RunStart):
                rlm.model = "openai:other"  # during the run

        rlm.on_event = switch
        result = rlm.run("what?")
        served = [r.model for r in srv.requests]
    assert result.answer == "done" and served == ["scripted", "scripted"]
    assert rlm.spec.model == "openai:other"
    start = next(e for e in read_events(trace) if isinstance(e, RunStart))
    assert start.spec["model"] == "openai:scripted" and start.spec["limits"]["max_iterations"] == 30
    assert start.spec["model_options"]["api_key_env"] == "(a key set in the options)"
    assert SECRET not in trace.read_text()


def test_the_translation_layer_makes_data_models_and_keeps_flag_names_out(tmp_path: Path) -> None:
    config = tmp_path / "rlmx.toml"
    config.write_text('[providers.openai]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "WORK_KEY"\n')
    options = RunOptions(
        model="openai:m",
        limits={"max_iterations": 4},
        config_file=str(config),
        tools=("json:dumps",),
        sandbox="local",
        trace=False,
    )
    said: list[str] = []
    built = build_spec(options, say=said.append)
    spec = built.spec
    assert isinstance(spec.model, ModelRef) and spec.model.options.base_url == "http://127.0.0.1:9/v1"
    assert spec.model.options.api_key_env == "WORK_KEY" or spec.model.options.api_key is None
    assert spec.limits.max_iterations == 4 and spec.tools == ("json:dumps",) and spec.trace is False
    assert any("UNSAFE" in line for line in said)
    json.dumps(spec.to_data({}))
    with pytest.raises(ConfigError) as bad:
        build_spec(RunOptions(model="openai:m", sandbox="docker", config_file=str(config)), say=said.append)
    assert "`sandbox`" in str(bad.value) and "--sandbox" not in str(bad.value)
