"""Benchmark (not a test): the trace viewer with a run of 10,000+ trace events.

Runs a real RLM (depth 2, function-backed models, no network) whose root fans out into thousands of
`llm_query_batched` sub-calls and a batch of child RLMs, renders the report, opens it in headless
Chromium and prints how long the page takes to become usable, to expand a 2,500-call batch, to search
and to reveal a deep node.

    .venv/bin/python benchmarks/viewer_10k.py [--events 10000] [--keep DIR]

Needs the `browser` extra (Playwright) and Debian's `chromium` (or RLMX_CHROMIUM=/path/to/chromium).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlmx import RLM, Limits
from rlmx.lm.base import CallSettings, Message
from rlmx.testing import FunctionLM
from rlmx.trace import load
from rlmx.view import write_report

CHROMIUM = os.environ.get("RLMX_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]  # fmt: skip
PER_BATCH = 2_500
CHILDREN = 20


def model(batches: int) -> FunctionLM:
    """Root: `batches` turns of PER_BATCH sub-calls each, then a batch of child RLMs, then FINAL.
    Children: one batch of 8 sub-calls, then FINAL. Sub-calls: a short answer about their chunk."""

    def reply(messages: list[Message], settings: CallSettings) -> str:
        if settings.purpose not in ("root", "child_root", "correction", "final"):  # a sub-call
            return f"summary of {str(messages[-1]['content'])[:40]!r}: nothing unusual, 3 items counted"
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if settings.depth == 1:  # a child RLM, asked "child N: check section"
            if turn == 0:
                return "```repl\nparts = llm_query_batched(['detail %d of ' % i + context[:200] for i in range(8)])\n```"
            return "FINAL_VAR(parts)"
        if turn < batches:
            return (
                f"Pass {turn + 1}: summarise every chunk.\n```repl\n"
                f"chunks = [context[i * 1200:(i + 1) * 1200] for i in range({PER_BATCH})]\n"
                f"notes_{turn} = llm_query_batched(['Summarise chunk %d:\\n' % i + c for i, c in enumerate(chunks)])\n"
                f"print(len(notes_{turn}))\n```"
            )
        if turn == batches:
            return f"```repl\nfound = rlm_query_batched(['child %d: check section' % i for i in range({CHILDREN})])\nprint(found[:2])\n```"
        return "FINAL(done)"

    return FunctionLM(reply, name="function:bench")


def make_trace(folder: Path, events: int) -> Path:
    batches = max(1, round((events - CHILDREN * 16) / PER_BATCH))
    path = folder / "run-10k.jsonl"
    context = ("lorem ipsum dolor sit amet, " * 50_000)[: PER_BATCH * 1200]
    lm = model(batches)
    limits = Limits(
        max_depth=2, max_llm_calls=100_000, max_iterations=batches + 3, max_concurrent_children=CHILDREN
    )
    RLM(lm, limits=limits, trace=path).run("Summarise every chunk", context)
    return path


def measure(html: Path) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    figures: dict[str, float] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        started = time.perf_counter()
        page.goto(html.resolve().as_uri(), timeout=120_000)
        page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        figures["page usable (load + parse + first render), s"] = time.perf_counter() - started
        figures["  of which the report's own script, s"] = page.evaluate("window.rlmxRenderMs") / 1000
        t = time.perf_counter()
        page.locator(".node[data-kind='turn'] > .row").first.click()
        page.locator(".node[data-kind='cell'] > .row").first.click()
        page.locator(".node[data-kind='batch'] > .row").first.click()
        page.wait_for_selector(".node[data-kind='sub']")
        figures[f"expand a {PER_BATCH:,}-call batch (first 100 drawn), s"] = time.perf_counter() - t
        t = time.perf_counter()
        page.fill("#search", "chunk 2499")
        page.wait_for_function(
            "document.getElementById('search-count').textContent.length > 0", timeout=60_000
        )
        figures["first search over every node, s"] = time.perf_counter() - t
        figures["  matches"] = float(page.inner_text("#search-count").split()[0])
        t = time.perf_counter()
        page.locator("#results .hit").last.click()
        page.wait_for_selector(".node.flash")
        figures["reveal the last match (deep in a batch), s"] = time.perf_counter() - t
        figures["DOM nodes after all that"] = float(
            page.evaluate("document.getElementsByTagName('*').length")
        )
        browser.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000, help="about how many trace events (>= 10,000)")
    parser.add_argument("--keep", type=Path, help="write the trace and report here instead of a temp dir")
    args = parser.parse_args(argv)
    if not os.access(CHROMIUM, os.X_OK):
        print(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set RLMX_CHROMIUM)", file=sys.stderr
        )
        return 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="rlmx-viewer-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    trace_path = make_trace(folder, args.events)
    run_s = time.perf_counter() - t
    trace = load(trace_path)
    t = time.perf_counter()
    html = write_report(trace_path, folder / "run-10k.html")
    render_s = time.perf_counter() - t
    rows: list[tuple[str, Any]] = [
        ("trace events", f"{len(trace.events):,}"),
        ("model calls", f"{len(trace.lm_calls()):,}"),
        ("trace size, MB", f"{trace_path.stat().st_size / 1e6:.1f}"),
        ("report size, MB", f"{html.stat().st_size / 1e6:.1f}"),
        ("scripted run (function models), s", f"{run_s:.1f}"),
        ("rlmx view (Python: load + render), s", f"{render_s:.2f}"),
    ]
    rows += [
        (k, f"{v:.2f}" if not k.endswith(("matches", "after all that")) else f"{v:,.0f}")
        for k, v in measure(html).items()
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(f"files: {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
