"""What `RLM._prepare` reads besides the spec: the run's trace file, tools named by reference, event
sinks, the keys that tell when the spec's models or tools were reassigned (`spec`: a RunSpec, which this
layer does not import), and the question's check."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmx.errors import ConfigError
from rlmx.paths import trace_dir

if TYPE_CHECKING:
    from rlmx.trace.writer import Sink


def check_question(question: Any, context: Any) -> None:
    """A question is a non-empty string, or None for a run whose context holds the task."""
    if question is None:
        if context is None:
            raise ConfigError("a run without a question needs a context: give `question`, `context` or both")
        return
    if not isinstance(question, str) or not question.strip():
        raise ConfigError("the question must be a non-empty string (or None: the context holds the task)")


def trace_file(trace: Any, run_id: str, trace_to: str | Path | None) -> Path | None:
    """The run's trace file: none when tracing is off, `trace_to` when given, a new file under the
    state dir for `trace=True`, else the path `trace` names."""
    if trace is None or trace is False:
        return None
    if trace_to is not None:
        return Path(trace_to)
    if trace is True:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        return trace_dir() / f"{stamp}-{run_id}.jsonl"
    return Path(trace)


def tool_refs(value: Any) -> tuple[str, ...] | None:
    """`MODULE:ATTR` references (a string, or a tuple or list of them), or None for anything else."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def sinks_of(on_event: Any) -> list[Sink]:
    if not on_event:
        return []
    return list(on_event) if isinstance(on_event, list) else [on_event]


def spec_key(value: Any) -> Any:
    """Strings, paths and flags compare by value; objects (LMs, settings, tools) by identity."""
    return value if value is None or isinstance(value, (str, bool, Path)) else id(value)


def models_key(spec: Any) -> tuple[Any, ...]:
    """What the models are made from; assigning any of these after construction takes effect at
    the next run."""
    by_depth = tuple(sorted((int(d), spec_key(m)) for d, m in spec.models_by_depth.items()))
    return (
        spec_key(spec.model),
        spec_key(spec.sub_model),
        by_depth,
        id(spec.model_options),
        id(spec.sub_model_options),
        spec_key(spec.cache),
    )


def tools_key(spec: Any) -> tuple[Any, ...]:
    return (spec_key(spec.tools), spec_key(spec.sub_tools), spec.tool_timeout_s, spec.tool_max_bytes)
