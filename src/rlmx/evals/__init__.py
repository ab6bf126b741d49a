"""Evaluation suite: the paper's benchmark families generated offline with exact gold answers, the RLM
run beside baselines (direct, bm25, summary), and reports with plots. See docs/evals.md.

    from rlmx.evals import EvalConfig, run_suite, generate_item
"""

from __future__ import annotations

from rlmx.evals.baselines import BASELINES, BaselineSettings
from rlmx.evals.items import EvalItem, Noise, Score, parse_size, size_label
from rlmx.evals.oracle import Oracle
from rlmx.evals.records import METHODS, load_records
from rlmx.evals.registry import FAMILIES, family, generate_item
from rlmx.evals.runner import EvalConfig, Runner, run_suite

__all__ = [
    "BASELINES",
    "FAMILIES",
    "METHODS",
    "BaselineSettings",
    "EvalConfig",
    "EvalItem",
    "Noise",
    "Oracle",
    "Runner",
    "Score",
    "family",
    "generate_item",
    "load_records",
    "parse_size",
    "run_suite",
    "size_label",
]
