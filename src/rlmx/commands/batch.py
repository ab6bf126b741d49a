"""`rlmx batch INPUT.jsonl --out RESULTS.jsonl`: many questions, each an RLM run, here or on a Ray cluster."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rlmx.commands.run_options import with_run_options
from rlmx.outcomes import EXIT_INTERRUPTED

HELP = (
    "Answer every question of INPUT (JSONL), writing one result line an item to --out.\n\n"
    'An input line: {"id": ..., "question": ..., "context": PATH | [PATHS] | {"text": ...}}, and optionally '
    '"model", "sub_model", "limits" (rlmx.Limits fields), "output_schema" and "meta". Bad lines are reported, '
    "by line number, before anything runs.\n\n"
    "A result line: id, answer, answer_source, stopped_by, usage, error, elapsed_s, trace_path, attempts, node, sandbox. "
    "Running the same command again resumes: ids already in --out are skipped. The options of `rlmx ask` are "
    "every item's defaults.\n\n"
    "Exit codes: 0 every item ended final; 3 some stopped at a limit, none failed; 1 some failed; 2 bad usage "
    "or input; 130 interrupted (Ctrl-C). Ray clusters, shared paths and keys: docs/scaling.md."
)


def register(app: typer.Typer) -> None:
    app.command(name="batch", help=HELP)(batch)


@with_run_options(exclude=("context", "concurrency", "trace", "as_json"))
def batch(
    input_file: Annotated[
        Path, typer.Argument(help="Items, one JSON object a line.", metavar="INPUT.jsonl", show_default=False)
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Results, one JSON line an item (appended; resumable).", show_default=False
        ),
    ],
    executor: Annotated[
        str, typer.Option(help="Where items run: local (this process) or ray (a Ray cluster; rlmx\\[ray]).")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster: auto, HOST:PORT or ray://HOST:PORT (default: $RAY_ADDRESS, else a new local Ray)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Items running at the same time.", min=1)] = 4,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Also rerun items whose result has an error; rewrite --out, one line an id.",
        ),
    ] = False,
    max_attempts: Annotated[
        int, typer.Option(help="Attempts of an item whose worker or node dies under it.", min=1)
    ] = 3,
    batch_max_cost_usd: Annotated[
        float | None, typer.Option(help="USD for the whole batch (every item's calls together).")
    ] = None,
    batch_max_llm_calls: Annotated[int | None, typer.Option(help="Model calls for the whole batch.")] = None,
    batch_max_total_tokens: Annotated[int | None, typer.Option(help="Tokens for the whole batch.")] = None,
    rpm: Annotated[
        int | None,
        typer.Option(help="Requests per minute per model, for the whole fleet (default: config's)."),
    ] = None,
    tpm: Annotated[int | None, typer.Option(help="Tokens per minute per model, for the whole fleet.")] = None,
    rate_window: Annotated[
        float, typer.Option(help="Seconds over which --rpm/--tpm are counted (scaled to the window).")
    ] = 60.0,
    trace_dir: Annotated[
        Path | None,
        typer.Option(help="Folder for the items' traces, where each runs (default: each node's state dir)."),
    ] = None,
    cpus_per_item: Annotated[
        float, typer.Option(help="Ray CPUs an item takes (0.25: four items a CPU; they mostly wait).")
    ] = 1.0,
    **run: Any,
) -> None:
    import rlmx.batch
    from rlmx.batch.items import read_items
    from rlmx.batch.progress import progress_for
    from rlmx.commands.run_options import run_options

    options = run_options(run)  # every item's defaults; an item's model, limits and schema over them
    quiet = run["quiet"]
    items = read_items(input_file)
    limits = rlmx.batch.BatchLimits(batch_max_llm_calls, batch_max_total_tokens, batch_max_cost_usd)
    display: Any = None

    def on_progress(summary: Any) -> None:
        if display is not None:
            display.tick(summary)

    batch_run = rlmx.batch.run(
        items,
        options=options,
        out=out,
        executor=executor,
        address=address,
        concurrency=concurrency,
        limits=limits,
        rpm=rpm,
        tpm=tpm,
        rate_window_s=rate_window,
        trace_dir=trace_dir,
        retry_failed=retry_failed,
        max_attempts=max_attempts,
        cpus_per_item=cpus_per_item,
        on_progress=on_progress,
    )
    todo = len(batch_run.todo)
    if not quiet and batch_run.summary.skipped:
        sys.stderr.write(
            f"[rlmx] resuming: {batch_run.summary.skipped} of {len(items)} items already in {out}\n"
        )
    display = progress_for(sys.stderr, todo, quiet=quiet)
    try:
        for record in batch_run:
            if display is not None:
                display.item(record, batch_run.summary)
    except KeyboardInterrupt:
        if display is not None:
            display.close()
        sys.stderr.write(
            f"rlmx: interrupted; the results so far are in {out}; run the same command to resume\n"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if display is not None:
        display.close()
    if not quiet:
        for line in batch_run.summary.lines():
            sys.stderr.write(line + "\n")
    raise typer.Exit(batch_run.summary.exit_code)
