"""One item of a batch, run where an executor put it: its RLM built from the batch's options (with the
item's own model, limits and schema), its calls checked against the batch's fleet, its result line made.

`defaults` are `rlmx ask`'s options by name (plain data: what a Ray task can carry; never an API key,
which each process reads from its own environment)."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from rlmx.batch.client import FleetClient, FleetRateLimiter, ItemBudget
from rlmx.batch.fleet import BatchLimits
from rlmx.batch.items import BatchItem
from rlmx.errors import RLMError

# the options of `rlmx ask` a batch passes on to every item's RLM, with their defaults
ASK_DEFAULTS: dict[str, Any] = {
    "model": None,
    "sub_model": None,
    "base_url": None,
    "depth_model": [],
    "temperature": None,
    "top_p": None,
    "reasoning_effort": None,
    "sub_temperature": None,
    "sub_top_p": None,
    "sub_reasoning_effort": None,
    "max_depth": None,
    "max_iterations": None,
    "max_llm_calls": None,
    "max_total_tokens": None,
    "max_output_tokens": None,
    "max_cost_usd": None,
    "price": [],
    "allow_unknown_price": False,
    "timeout": None,
    "max_errors": None,
    "prompt": None,
    "system_prompt_append": None,
    "model_concurrency": None,  # requests in flight per model in each process (`rlmx ask --concurrency`)
    "cache": False,
    "config_file": None,
    "no_trace": False,
    "trace_full": False,
    "sandbox": "process",
    "tools": [],
    "output_schema": None,
    "prefilter": None,
    "allow_empty_context": False,
    "include": [],
    "exclude": [],
    "no_gitignore": False,
    "trace": None,
}


def item_options(defaults: dict[str, Any], item: BatchItem) -> dict[str, Any]:
    """The options of one item's RLM: the batch's, with the item's own model, limits and schema."""
    o = {**ASK_DEFAULTS, **defaults, "context": []}
    o["concurrency"] = o.pop("model_concurrency")
    if item.model is not None:
        o["model"] = item.model
    if item.sub_model is not None:
        o["sub_model"] = item.sub_model
    if item.output_schema is not None:
        o["output_schema"] = item.output_schema
    o["item_limits"] = dict(item.limits)
    return o


def rlm_key(item: BatchItem) -> str:
    """Items with the same key share one RLM (and its model connections) in a process."""
    return json.dumps([item.model, item.sub_model, item.limits, item.output_schema], sort_keys=True)


def host_name() -> str:
    return socket.gethostname()


class ItemRunner:
    """Builds, once per process and setting, the RLMs a batch's items need, and runs items."""

    def __init__(
        self,
        defaults: dict[str, Any],
        client: FleetClient,
        limits: BatchLimits,
        *,
        rated_models: frozenset[str] = frozenset(),
        trace_dir: str | None = None,
        node: str | None = None,
    ) -> None:
        self.defaults = defaults
        self.client = client
        self.limits = limits
        self.rated_models = rated_models
        self.trace_dir = trace_dir
        self.node = node or host_name()
        self._built: dict[str, Any] = {}
        self._limiters: dict[str, FleetRateLimiter] = {}

    def limiter(self, model: str) -> FleetRateLimiter | None:
        if model not in self.rated_models:
            return None
        if model not in self._limiters:
            self._limiters[model] = FleetRateLimiter(self.client, model)
        return self._limiters[model]

    def built(self, item: BatchItem, *, say: Any = None) -> Any:
        """The item's RLM (rlmx.recipe.BuiltRLM), built on first use; refusals raise here."""
        from rlmx.recipe import build_rlm

        key = rlm_key(item)
        if key not in self._built:
            self._built[key] = build_rlm(
                item_options(self.defaults, item), limiters=self.limiter, say=say or (lambda _line: None)
            )
        return self._built[key]

    async def aclose(self) -> None:
        """Close the model connections of the RLMs built in the running event loop."""
        for built in self._built.values():
            await built.rlm.aclose()

    async def run(self, item: BatchItem, context: Any, attempt: int) -> dict[str, Any]:
        """The item's result line (its failure included: never raised)."""
        started = time.monotonic()
        run_id = uuid.uuid4().hex[:12]
        trace_to = None
        if self.trace_dir:
            trace_to = Path(self.trace_dir) / f"{safe_name(item.key)}.{attempt}.{run_id}.jsonl"
        budget = ItemBudget(self.client, self.limits, item.key, attempt)
        try:
            built = self.built(item)
            result = await built.rlm.arun(
                item.question, context, output=built.output, shared=budget, trace_to=trace_to, run_id=run_id
            )
        except RLMError as exc:  # refused before or while running (a context found empty, a bad setting)
            return self.record(item, attempt, started, error=str(exc), trace=trace_to)
        except Exception as exc:  # a machinery failure: the item's error, in full, in its result line
            return self.record(item, attempt, started, error=f"{type(exc).__name__}: {exc}", trace=trace_to)
        return result_line(
            item,
            answer=result.answer,
            answer_source=result.answer_source,
            stopped_by=result.stopped_by,
            usage=result.usage,
            error=result.error,
            elapsed_s=time.monotonic() - started,
            trace_path=result.trace_path,
            attempts=attempt,
            node=self.node,
        )

    def record(
        self, item: BatchItem, attempt: int, started: float, *, error: str, trace: Path | None
    ) -> dict[str, Any]:
        return failed_record(
            item,
            error,
            attempts=attempt,
            node=self.node,
            elapsed_s=time.monotonic() - started,
            trace_path=str(trace) if trace and trace.exists() else None,
        )


def failed_record(
    item: BatchItem,
    error: str | None,
    *,
    attempts: int,
    node: str | None,
    elapsed_s: float = 0.0,
    stopped_by: str = "error",
    trace_path: str | None = None,
) -> dict[str, Any]:
    """A result line for an item that produced no run result: it failed, or never started."""
    return result_line(
        item,
        stopped_by=stopped_by,
        error=error,
        elapsed_s=elapsed_s,
        trace_path=trace_path,
        attempts=attempts,
        node=node,
    )


def result_line(
    item: BatchItem,
    *,
    stopped_by: str,
    attempts: int,
    node: str | None,
    answer: Any = None,
    answer_source: str = "none",
    usage: dict[str, Any] | None = None,
    error: str | None = None,
    elapsed_s: float = 0.0,
    trace_path: str | None = None,
) -> dict[str, Any]:
    """An item's line in the results file (rlmx.batch.results.FIELDS, and `meta` when the input has it)."""
    return {
        "id": item.id,
        "answer": answer,
        "answer_source": answer_source,
        "stopped_by": stopped_by,
        "usage": usage or {},
        "error": error,
        "elapsed_s": round(elapsed_s, 3),
        "trace_path": trace_path,
        "attempts": attempts,
        "node": node,
        **({"meta": item.meta} if item.meta is not None else {}),
    }


def safe_name(key: str) -> str:
    """An id as part of a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:80] or "item"
