"""What is compared between the two sides, normalised, and the one-line summaries of the table.

A field is compared exactly after normalisation: the system prompt (each side writes its own) is
reduced to its role, the rewordings in REWORDINGS map both sides' wording of a line to one name, and
times are reduced to their type (an elapsed time also to whether it passed the limit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diff_harness import Observation

FIELDS = (
    "crash",
    "requests",
    "outcome",
    "exception_message",
    "usage",
    "completion_shape",
    "logger",
    "events",
)


@dataclass(frozen=True)
class Rewording:
    """A message line each side words its own way for the same purpose."""

    name: str  # the line both map to; `{group}` takes a named group of the match, digits' commas dropped
    official: str  # a regex of the official runtime's line
    compat: str  # a regex of rlmx.compat's line
    reason: str


REWORDINGS: list[Rewording] = [
    Rewording(
        "<first-turn safeguard>",
        r"You have not interacted with the REPL environment or seen your prompt / context yet\..*",
        r"You have not looked at the context or used the REPL yet\. Look at the context first; "
        r"do not give a final answer yet\.",
        "the first turn's 'look before answering' line, in rlmx's own words",
    ),
    Rewording(
        "<context description: {type} of {chars} characters>",
        r"Your context is a (?P<type>\w+) of (?P<chars>[\d,]+) total characters\..*",
        r"Your context is a (?P<type>\w+) of (?P<chars>[\d,]+) (?:total )?characters\b.*",
        "what the context is (its type and size), in rlmx's own words",
    ),
    Rewording(
        "<note: {n} contexts>",
        r"Note: You have (?P<n>\d+) contexts available \(context_0 through context_\d+\)\.",
        r"Note: the REPL holds (?P<n>\d+) contexts, context_0 to context_\d+\.",
        "the turn message's note on a persistent REPL's contexts, in rlmx's own words",
    ),
    Rewording(
        "<note: {n} earlier histories>",
        r"Note: You have (?P<n>\d+) prior conversation histor(y|ies) available .*",
        r"Note: the REPL holds (?P<n>\d+) earlier conversation.*",
        "the turn message's note on a persistent REPL's histories, in rlmx's own words",
    ),
    Rewording(
        "<summary ask>",
        r"Summarize your progress so far\. Include:",
        r"Write a short summary of where the task stands, for you to continue from: .*",
        "the compaction's request for a summary, in rlmx's own words",
    ),
    Rewording(
        "<compacted {n} time(s): continue>",
        r"Your conversation has been compacted (?P<n>\d+) time\(s\)\. .*",
        r"The conversation above was compacted \((?P<n>\d+) so far\): .*",
        "the line after a compaction's summary, in rlmx's own words",
    ),
    Rewording(
        "<final-answer ask>",
        r"Please provide a final answer to the user's question based on the information provided\.",
        r"Give the final answer to the question now, from what the turns above found\.",
        "the assistant line that asks for the answer after the last turn, in rlmx's own words",
    ),
]
USED: dict[tuple[str, str], int] = {}  # (rewording name, side) -> lines it mapped, for the staleness test


def reword(line: str, side: str) -> str:
    for r in REWORDINGS:
        match = re.fullmatch(r.official if side == "official" else r.compat, line)
        if match:
            USED[(r.name, side)] = USED.get((r.name, side), 0) + 1
            return r.name.format(**{k: v.replace(",", "") for k, v in match.groupdict().items()})
    return line


def requests_of(obs: Observation) -> list[Any]:
    out = []
    for req in obs.requests:
        msgs = [[m[0], *(reword(line, obs.side) for line in m[1:])] for m in req["messages"]]
        out.append([req["kind"], req.get("params", {}), msgs])
    return out


def _calls(obs: Observation) -> list[dict[str, Any]]:
    return (obs.result or {}).get("calls") or []


def _outcome(call: dict[str, Any]) -> dict[str, Any]:
    if "exception" in call:
        exc = call["exception"]
        fields = dict(exc["fields"])
        if isinstance(fields.get("elapsed"), (int, float)) and isinstance(
            fields.get("timeout"), (int, float)
        ):
            fields["elapsed"] = "past the timeout" if fields["elapsed"] > fields["timeout"] else "within"
        fields = {k: round(v, 9) if isinstance(v, float) else v for k, v in fields.items()}
        return {
            "exception": exc["type"],
            "official_name": exc["official_name"],
            "is_value_error": exc.get("is_value_error"),
            "fields": fields,
        }
    c = call["completion"]
    return {"response": c["response"], "response_type": c["response_type"]}


def fields_of(obs: Observation) -> dict[str, Any]:
    calls = _calls(obs)
    done = [c["completion"] for c in calls if "completion" in c]
    shape_keys = (
        "class",
        "root_model",
        "prompt_type",
        "prompt_repr",
        "execution_time_type",
        "error",
        "to_dict_keys",
    )
    result = obs.result or {}
    return {
        "crash": obs.crash,
        "requests": requests_of(obs),
        "outcome": [_outcome(c) for c in calls],
        "exception_message": [
            re.sub(r"\d+\.\d+s", "<t>s", c["exception"]["message"]) for c in calls if "exception" in c
        ],
        "usage": [c["usage_summary"] for c in done],
        "completion_shape": [{k: c.get(k) for k in shape_keys} for c in done],
        "logger": {"metadata": [c["metadata"] for c in done], "log_files": result.get("log_files")},
        "events": result.get("events"),
    }


def differing(official: Observation, compat: Observation) -> dict[str, tuple[Any, Any]]:
    a, b = fields_of(official), fields_of(compat)
    return {f: (a[f], b[f]) for f in FIELDS if a[f] != b[f]}


def summary(obs: Observation) -> str:
    """One cell of the table: each call's response or exception, and the requests the server saw."""
    if obs.crash:
        return f"crash: {obs.crash[:60]}"
    parts = [obs.note] if obs.note else []
    for call in _calls(obs):
        outcome = _outcome(call)
        if "exception" in outcome:
            shown = {k: v for k, v in outcome["fields"].items() if k not in ("partial_answer", "last_error")}
            parts.append(f"{outcome['exception']}({', '.join(f'{k}={v}' for k, v in shown.items())})")
        else:
            parts.append(repr(outcome["response"])[:40])
    kinds: dict[str, int] = {}
    for req in obs.requests:
        kinds[req["kind"]] = kinds.get(req["kind"], 0) + 1
    return f"{'; '.join(parts)} [{', '.join(f'{n} {k}' for k, n in kinds.items())}]"
