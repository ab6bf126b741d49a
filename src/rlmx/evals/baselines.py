"""The baselines the RLM is compared with, all on the root model:

- `direct`: the whole context in one call, cut in the middle to fit the model's window (marked truncated);
- `bm25`: the context cut into chunks, the top-k chunks by BM25 (via `bm25s`) in one call;
- `summary`: read the context part by part keeping notes, then answer from the notes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rlmx.errors import ConfigError
from rlmx.evals.items import EvalItem, render_context, render_documents
from rlmx.evals.prompting import fill, overhead_chars
from rlmx.lm.base import LM, CallSettings, LMResponse

BASELINES = ("direct", "bm25", "summary")
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class BaselineSettings:
    window: int = 32_768  # the model's context window in tokens
    max_output_tokens: int | None = None
    reserve_tokens: int = 1_024  # kept free for the reply when max_output_tokens is not set
    bm25_chunk_tokens: int = 512
    bm25_k: int = 20
    notes_chars: int = 6_000

    def __post_init__(self) -> None:
        numbers = (self.window, self.reserve_tokens, self.bm25_chunk_tokens, self.bm25_k, self.notes_chars)
        if min(numbers) < 1 or (self.max_output_tokens is not None and self.max_output_tokens < 1):
            raise ConfigError("baseline settings (window, bm25 chunk size and k, notes size) must be >= 1")

    @property
    def context_chars(self) -> int:
        """Characters of context one call may carry."""
        reserve = self.max_output_tokens or self.reserve_tokens
        return max(1_000, (self.window - reserve - 64) * CHARS_PER_TOKEN)


@dataclass
class MethodResult:
    answer: str
    stopped_by: str = "final"
    usage: dict[str, Any] = field(
        default_factory=lambda: {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    )
    elapsed_s: float = 0.0
    error: str | None = None
    truncated: bool = False
    iterations: int = 1
    trace_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, response: LMResponse, cost: float | None) -> None:
        u = self.usage
        u["calls"] += 1
        u["input_tokens"] += response.usage.input_tokens
        u["output_tokens"] += response.usage.output_tokens
        u["cost_usd"] = None if cost is None or u["cost_usd"] is None else u["cost_usd"] + cost


Pricer = Any  # Callable[[str, Usage], float | None]


async def _call(lm: LM, prompt: str, result: MethodResult, settings: BaselineSettings, pricer: Pricer) -> str:
    response = await lm.complete(
        [{"role": "user", "content": prompt}], CallSettings(max_output_tokens=settings.max_output_tokens)
    )
    cost = response.usage.cost_usd
    if cost is None and pricer is not None:
        cost = pricer(lm.name, response.usage)
    result.add(response, cost)
    return response.text


def cut_middle(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters by removing its middle (LongBench's truncation); (text, cut?)."""
    if len(text) <= limit:
        return text, False
    note = f"\n[... {len(text) - limit:,} characters cut to fit the model's window ...]\n"
    keep = max(0, limit - len(note))
    return text[: keep // 2] + note + text[len(text) - (keep - keep // 2) :], True


async def run_direct(
    lm: LM, item: EvalItem, settings: BaselineSettings, pricer: Pricer = None
) -> MethodResult:
    started = time.monotonic()
    limit = settings.context_chars - overhead_chars("direct", item.question)
    context, truncated = cut_middle(render_context(item.context), limit)
    result = MethodResult(answer="", truncated=truncated)
    result.answer = await _call(
        lm, fill("direct", context=context, question=item.question), result, settings, pricer
    )
    result.elapsed_s = time.monotonic() - started
    return result


def chunks_of(item: EvalItem, chunk_chars: int) -> list[str]:
    """Retrieval units: whole documents when they are small, else pieces cut at line boundaries, each
    piece of a document under its `=== path ===` header."""
    if isinstance(item.context, str):
        return _line_pieces(item.context, chunk_chars)
    out = []
    for doc in item.context:
        whole = render_documents([doc])
        if len(whole) <= 4 * chunk_chars:
            out.append(whole)
        else:
            out += [f"=== {doc['path']} ===\n{piece}" for piece in _line_pieces(doc["text"], chunk_chars)]
    return out


def _line_pieces(text: str, size: int) -> list[str]:
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):  # cut after a line, else after a sentence, else where the size ends
            newline = text.rfind("\n", start + size // 2, end)
            sentence = text.rfind(". ", start + size // 2, end)
            end = newline + 1 if newline > 0 else sentence + 2 if sentence > 0 else end
        pieces.append(text[start:end])
        start = end
    return pieces


def bm25_rank(chunks: list[str], query: str, k: int) -> list[int]:
    try:
        import bm25s
    except ImportError as exc:
        raise ConfigError("the bm25 baseline needs bm25s: pip install 'rlmx[evals]'") from exc
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(chunks, stopwords="en", show_progress=False), show_progress=False)
    found, _ = retriever.retrieve(
        bm25s.tokenize([query], stopwords="en", show_progress=False),
        k=min(k, len(chunks)),
        show_progress=False,
    )
    return [int(i) for i in found[0]]


async def run_bm25(lm: LM, item: EvalItem, settings: BaselineSettings, pricer: Pricer = None) -> MethodResult:
    started = time.monotonic()
    chunks = chunks_of(item, settings.bm25_chunk_tokens * CHARS_PER_TOKEN)
    ranked = bm25_rank(chunks, item.question, settings.bm25_k)
    budget = settings.context_chars - overhead_chars("bm25", item.question)
    chosen: list[str] = []
    for index in ranked:
        if sum(len(c) + 2 for c in chosen) + len(chunks[index]) > budget:
            break
        chosen.append(chunks[index])
    result = MethodResult(answer="", extra={"chunks": len(chunks), "retrieved": len(chosen)})
    prompt = fill("bm25", k=len(chosen), passages="\n\n".join(chosen), question=item.question)
    result.answer = await _call(lm, prompt, result, settings, pricer)
    result.elapsed_s = time.monotonic() - started
    return result


async def run_summary(
    lm: LM, item: EvalItem, settings: BaselineSettings, pricer: Pricer = None
) -> MethodResult:
    started = time.monotonic()
    room = settings.context_chars - overhead_chars("summary_step", item.question) - settings.notes_chars
    parts = _line_pieces(render_context(item.context), max(2_000, room))
    result = MethodResult(answer="", iterations=len(parts) + 1, extra={"parts": len(parts)})
    notes = "(none yet)"
    for number, part in enumerate(parts, 1):
        prompt = fill(
            "summary_step",
            question=item.question,
            notes=notes,
            part=number,
            parts=len(parts),
            chunk=part,
            notes_chars=settings.notes_chars,
        )
        notes = (await _call(lm, prompt, result, settings, pricer))[: settings.notes_chars * 2]
    result.answer = await _call(
        lm, fill("summary_final", notes=notes, question=item.question), result, settings, pricer
    )
    result.elapsed_s = time.monotonic() - started
    return result


RUNNERS = {"direct": run_direct, "bm25": run_bm25, "summary": run_summary}
