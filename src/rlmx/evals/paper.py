"""Published figures of the RLM paper (Zhang, Kraska, Khattab, arXiv 2512.24601; GPT-5 root, GPT-5-mini
sub-calls) for the families that match ours. Scores on a 0-1 scale, costs in USD per query.

Their `bm25` is "CodeAct + BM25" (an agent with a BM25 tool), their `direct` is the base model, which
hit its context limit on CodeQA and BrowseComp-Plus; these are what ours are set beside, not equal to."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PaperResult:
    benchmark: str
    tokens: tuple[int, int]  # the context sizes of the benchmark (a range, or one size twice)
    scores: dict[str, float]
    costs: dict[str, float] = field(default_factory=dict)
    note: str = ""


PAPER: dict[str, PaperResult] = {
    "oolong": PaperResult(
        "OOLONG (trec_coarse), 131K tokens", (131_072, 131_072),
        {"rlm": 0.56, "direct": 0.44, "summary": 0.46, "bm25": 0.38}, {"rlm": 0.43},
    ),
    "oolong_pairs": PaperResult(
        "OOLONG-Pairs, 32K tokens, F1", (32_768, 32_768),
        {"rlm": 0.58, "direct": 0.001, "summary": 0.001, "bm25": 0.247}, {"rlm": 0.33},
    ),
    "codeqa": PaperResult(
        "LongBench-v2 CodeQA, 23K-4.2M tokens", (23_000, 4_200_000),
        {"rlm": 0.62, "direct": 0.24, "summary": 0.58, "bm25": 0.22}, {"rlm": 0.11, "summary": 1.31},
        "base model hit its context limit",
    ),
    "doc_multihop": PaperResult(
        "BrowseComp-Plus, 1K documents, 6-11M tokens (LLM-judged)", (6_000_000, 11_000_000),
        {"rlm": 0.913, "direct": 0.0, "summary": 0.705, "bm25": 0.51},
        {"rlm": 0.99, "summary": 0.57, "bm25": 0.71},
        "base model hit its context limit",
    ),
}  # fmt: skip
