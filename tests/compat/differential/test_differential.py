"""The official `rlms` 0.1.3 and `rlmx.compat.rlms`, run on the same scenarios against scripted servers
over HTTP: the requests each server saw, the responses, the exceptions and their fields, usage, the
logger's records and the callbacks must be the same, or differ exactly as DELIBERATE says (each entry
with its reason; an entry whose difference is gone, or changed, fails too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from diff_compare import FIELDS, REWORDINGS, USED, differing, fields_of
from diff_harness import OBSERVED, Observation, run_side
from diff_kit import Scenario
from diff_scenarios import BY_NAME, SCENARIOS

pytestmark = pytest.mark.peers

# what the official runtime does in each scenario (so a scenario that stops exercising its case fails)
OFFICIAL_OUTCOME: dict[str, str] = {
    "sub_call": "4",
    "batched_sub_calls": "ONE|TWO|THREE",
    "other_backend": "4",
    "sampling_args": "4",
    "sampling_args_any_key": "4",
    "object_tool": "2",
    "object_tool_in_process": "2",
    "custom_system_prompt": "3",
    "out_of_iterations": "final-from-history",
    "custom_tools": "10",
    "depth_2": "CHILD-TASK/pong",
    "rlm_query_batched": "CHILD-A|CHILD-B",
    "rlm_query_at_depth_cap": "pong",
    "none_answer": "None",
    "non_string_answer": "{'n': 3, 'items': [1, 2]}",
    "dict_context": "3",
    "message_list_context": "[{'role': 'user', 'content': 'hello there'}, {'role': 'assistant', 'content': 'hi'}]",
    "without_root_prompt": "42",
    "with_root_prompt": "42",
    "max_errors": "ErrorThresholdExceededError",
    "error_then_recovery": "recovered",
    "logger_memory": "4",
    "logger_dir": "4",
    "python_fence": "from-repl",
    "final_text": "from-repl",
    "final_in_code": "from-answer",
    "answer_then_raise": "kept",
    "several_blocks": "first",
    "answer_rebound": "rebound",
    "scaffold_restored": "alpha True",
    "show_vars": "Available variables: {'f': 'TextIOWrapper', 'context_0': 'str', 'context': 'str', 'x': 'int', 'words': 'list'}",
    "child_out_of_iterations": "root got: child-final",
    "long_output": "done",
    "timeout": "TimeoutExceededError",
    "token_limit": "TokenLimitExceededError",
    "budget": "BudgetExceededError",
    "interrupted": "CancellationError",
    "setup_code": "42",
    "persistent": "42 second context",
    "compaction": "list:2",
    "compaction_tiny_threshold": "list:3",
}


@dataclass(frozen=True)
class Deliberate:
    """A documented difference: `holds(official_value, compat_value)` pins what it is."""

    reason: str
    holds: Callable[[Any, Any], bool]


# (scenario or "*", field or "*") -> the difference, its one-line reason and what pins it
def _calls_of(usage: list[dict[str, Any]], model: str = "scripted") -> list[int]:
    return [u["model_usage_summaries"][model]["total_calls"] for u in usage]


REFUSED_OBJECT = (
    "rlmx's default environment is isolated: an object tool value cannot cross, so compat refuses it"
    " (a ValueError) with a line naming environment_kwargs={'isolated': False} (issue 27)"
)

LOADER_F = (
    "the official REPL also holds `f`, the file handle its context loader leaves behind; compat's REPL has"
    " no such name"
)


def _without_f(outcome: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**o, "response": str(o.get("response")).replace("'f': 'TextIOWrapper', ", "")} for o in outcome]


def _logger_without_f(logger: dict[str, Any]) -> dict[str, Any]:
    def strip(meta: Any) -> Any:
        if not isinstance(meta, dict):
            return meta
        return {**meta, "block_locals": [[n for n in names if n != "f"] for names in meta["block_locals"]]}

    return {**logger, "metadata": [strip(m) for m in logger["metadata"]]}


def _logger_without_locals(logger: dict[str, Any]) -> dict[str, Any]:
    def empty(meta: Any) -> Any:
        if not isinstance(meta, dict):
            return meta
        return {**meta, "block_locals": [[] for _ in meta["block_locals"]]}

    return {**logger, "metadata": [empty(m) for m in logger["metadata"]]}


NO_LOCALS = (
    "compat's block records carry `locals` as {}: the REPL's names and values stay in the isolated worker"
    " (the trace does not carry them across); everything else in the records is the official's"
)


def _system_split(requests: Any) -> tuple[list[str], Any]:
    """The requests' system messages, and the requests with those messages blanked."""
    systems: list[str] = []

    def blank(message: list[Any]) -> list[Any]:
        if message and message[0] == "system":
            systems.append(message[1])
            return ["system", "<system>"]
        return message

    rest = [[kind, params, [blank(m) for m in messages]] for kind, params, messages in requests]
    return systems, rest


def _own_tools_section(off: Any, comp: Any) -> bool:
    (off_systems, off_rest), (comp_systems, comp_rest) = _system_split(off), _system_split(comp)
    return (
        off_rest == comp_rest
        and len(off_systems) == len(comp_systems) == 1
        and all(
            s.startswith("You are a scripted test model.")
            and s.endswith("End of instructions.")
            and all(f"`{name}" in s for name in ("word_count", "lookup", "LIMIT"))
            for s in off_systems + comp_systems
        )
        and "ToolError" in comp_systems[0]
    )


DELIBERATE: dict[tuple[str, str], Deliberate] = {
    ("*", "logger"): Deliberate(
        NO_LOCALS,
        lambda off, comp: "'f'" in str(off) and _logger_without_locals(off) == comp,
    ),
    ("custom_system_prompt", "requests"): Deliberate(
        "{custom_tools_section} is filled with rlmx's own tools section (signatures, the JSON bridge,"
        " ToolError), in the same place of the user's prompt",
        _own_tools_section,
    ),
    ("show_vars", "outcome"): Deliberate(
        LOADER_F, lambda off, comp: "'f': 'TextIOWrapper'" in str(off) and _without_f(off) == comp
    ),
    ("object_tool", "outcome"): Deliberate(
        REFUSED_OBJECT,
        lambda off, comp: (
            off == [{"response": "2", "response_type": "str"}]
            and comp[0]["is_value_error"] is True
            and not comp[0]["official_name"]
        ),
    ),
    ("object_tool", "exception_message"): Deliberate(
        REFUSED_OBJECT,
        lambda off, comp: off == [] and 'environment_kwargs={"isolated": False}' in comp[0],
    ),
    ("object_tool", "*"): Deliberate(
        REFUSED_OBJECT + ": no request is sent, no completion returned",
        lambda off, comp: comp in ([], {"metadata": [], "log_files": None}),
    ),
    ("sampling_args", "usage"): Deliberate(
        "the official loses the root model's usage when sub_sampling_args mirrors its backend under the same"
        " model name (its clients are keyed by model name); rlmx.compat counts every call",
        lambda off, comp: _calls_of(off) == [1] and _calls_of(comp) == [3],
    ),
}


def deliberate_for(scenario: str, field: str) -> Deliberate | None:
    """The entry for this scenario and field, else this scenario's any-field entry, else any scenario's."""
    return (
        DELIBERATE.get((scenario, field)) or DELIBERATE.get((scenario, "*")) or DELIBERATE.get(("*", field))
    )


def observe(scenario: Scenario, tmp: Path) -> tuple[Observation, Observation]:
    pair = (run_side("official", scenario, tmp / "official"), run_side("compat", scenario, tmp / "compat"))
    OBSERVED[scenario.name] = pair
    return pair


def last_outcome(obs: Observation) -> str:
    call = (obs.result or {}).get("calls", [{}])[-1]
    if "exception" in call:
        return str(call["exception"]["type"])
    return str(call.get("completion", {}).get("response"))


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_scenario_matches_the_official_runtime(
    name: str, official_python: Path, compat_python: str, tmp_path: Path
) -> None:
    official, compat = observe(BY_NAME[name], tmp_path)
    assert official.crash is None, f"the official side failed to run: {official.crash}"
    assert last_outcome(official) == OFFICIAL_OUTCOME[name]
    check_fields(name, official, compat)


def check_fields(name: str, official: Observation, compat: Observation) -> None:
    """Each field the same, or different exactly as its DELIBERATE entry says."""
    differs = differing(official, compat)
    problems = []
    for field in FIELDS:
        entry = deliberate_for(name, field)
        if field in differs and entry is None:
            off, comp = differs[field]
            problems.append(f"{field}: official {off!r}\n    compat   {comp!r}")
        elif field in differs and entry is not None and not entry.holds(*differs[field]):
            problems.append(f"{field}: differs, but not as documented ({entry.reason}): {differs[field]!r}")
        elif field not in differs and entry is not None and (name, field) in DELIBERATE:
            problems.append(f"{field}: the documented difference is gone ({entry.reason}): remove its entry")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def test_every_rewording_is_still_in_use(official_python: Path, compat_python: str, tmp_path: Path) -> None:
    """A rewording that no scenario meets any more on a side is stale."""
    USED.clear()  # counted afresh from the observations alone
    for scenario in SCENARIOS:
        if scenario.name not in OBSERVED:  # run on its own (-k): observe what the table needs
            observe(scenario, tmp_path / scenario.name)
        for obs in OBSERVED[scenario.name]:
            fields_of(obs)
    stale = [
        (r.name, side) for r in REWORDINGS for side in ("official", "compat") if not USED.get((r.name, side))
    ]
    assert not stale, f"rewordings no scenario meets: {stale}"
