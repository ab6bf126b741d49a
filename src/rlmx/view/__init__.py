"""The trace viewer: one self-contained HTML file (no server, no CDN, works offline).

    from rlmx.view import write_report
    write_report("run.jsonl", "run.html")      # or: rlmx view run.jsonl -o run.html --open

The page shows a summary, a timeline and the nested call tree (every turn with its code and output,
every sub-call, every child RLM as a subtree, cost per node). The tree is drawn lazily from JSON
embedded in the page, so traces with tens of thousands of events stay responsive.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from rlmx.trace import Trace, load
from rlmx.view.model import report_data

__all__ = ["render_html", "report_data", "write_report"]


def asset(name: str) -> str:
    return resources.files("rlmx.view").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """JSON that is safe inside a <script> element: no '<' (so no '</script>' or '<!--') survives."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render_html(trace: Trace, *, title: str | None = None) -> str:
    """The report for one run, as a complete HTML document."""
    data = report_data(trace)
    question = " ".join(trace.root.question.split())[:80]
    page = asset("report.html")
    parts = {
        "__TITLE__": html_escape(title or f"rlmx trace: {question}"),
        "__CSS__": asset("report.css"),
        "__JS__": asset("report.js"),
        "__DATA__": embed_json(data),
    }
    # one pass over the template: inserted text (a question, the data) is never scanned for markers
    return re.sub(r"__(?:TITLE|CSS|JS|DATA)__", lambda match: parts[match.group(0)], page)


def default_output(trace_path: Path) -> Path:
    return trace_path.with_suffix(".html")


def write_report(trace_path: str | Path, out: str | Path | None = None, *, run: int = -1) -> Path:
    """Render the run at index `run` of a JSONL trace (default: the last) to `out` (default: beside it)."""
    source = Path(trace_path)
    target = Path(out) if out is not None else default_output(source)
    html = render_html(load(source, run=run))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
