"""How a run can end, what a model call is for, where an answer came from, and the CLI's exit codes:
defined here once, imported by the engine, `RunResult`, the CLI, serve, MCP, evals and the docs.

    stop reason      exit code of `rlmx ask`
    final            0
    a limit          3 when the forced final answer was produced, else 1
    error            1
    interrupted      130
    (bad usage)      2, before any run
"""

from __future__ import annotations

from typing import Literal, get_args

StopReason = Literal[
    "final",  # the model gave its answer (FINAL, FINAL_VAR)
    "max_iterations",
    "max_llm_calls",
    "max_total_tokens",
    "max_cost_usd",
    "timeout",
    "max_errors",  # Limits.max_errors turns in a row whose code raised
    "batch_max_llm_calls",  # a whole batch's limits (rlmx batch), shared by every item of the batch
    "batch_max_total_tokens",
    "batch_max_cost_usd",
    "error",  # a machinery failure (provider, sandbox) or an answer that failed its schema for good
    "interrupted",  # Ctrl-C, or the caller cancelled the run
]
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
LimitReason = Literal[
    "max_iterations",
    "max_llm_calls",
    "max_total_tokens",
    "max_cost_usd",
    "timeout",
    "max_errors",
    "batch_max_llm_calls",
    "batch_max_total_tokens",
    "batch_max_cost_usd",
]
BatchLimitReason = Literal["batch_max_llm_calls", "batch_max_total_tokens", "batch_max_cost_usd"]
BATCH_LIMIT_REASONS: tuple[BatchLimitReason, ...] = get_args(BatchLimitReason)
LIMIT_REASONS: tuple[LimitReason, ...] = get_args(LimitReason)

Purpose = Literal[
    "root",  # a turn of the root RLM
    "child_root",  # a turn of a child RLM
    "llm_query",  # a plain sub-call from the REPL
    "fallback",  # rlm_query at the depth limit, run as a plain call
    "compaction",  # condensing older turns of the history
    "final",  # the forced final answer after a limit
    "correction",  # a root turn after its answer failed the output schema
]
PURPOSES: tuple[Purpose, ...] = get_args(Purpose)
SUB_CALL_PURPOSES: tuple[Purpose, ...] = ("llm_query", "fallback")  # calls made by code, not turns

AnswerSource = Literal[
    "final",  # FINAL(...)
    "final_var",  # FINAL_VAR(name)
    "answer_dict",  # answer["content"] with answer["ready"] = True (the official contract)
    "prose",  # a limit's forced reply without FINAL, its code removed
    "none",  # no answer
]
ANSWER_SOURCES: tuple[AnswerSource, ...] = get_args(AnswerSource)

EXIT_OK = 0
EXIT_RUN_ERROR = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3
EXIT_INTERRUPTED = 130


def exit_code(stopped_by: StopReason, answered: bool) -> int:
    """The `rlmx ask` exit code of a run that ended by `stopped_by`; `answered`: an answer was produced
    and nothing failed (`RunResult.answered`)."""
    if stopped_by == "interrupted":
        return EXIT_INTERRUPTED
    if not answered:
        return EXIT_RUN_ERROR
    return EXIT_OK if stopped_by == "final" else EXIT_LIMIT
