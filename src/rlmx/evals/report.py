"""The report of an eval run: markdown tables (score, cost, tokens, latency per method and size) and
PNG plots of score, cost and latency against context size, with the paper's figures beside ours."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.evals.items import size_label
from rlmx.evals.needs import PLOTS_MISSING, plots_available
from rlmx.evals.paper import PAPER
from rlmx.evals.records import METHODS, latest, load_records

COLOURS = {"rlm": "#1f77b4", "direct": "#d62728", "bm25": "#2ca02c", "summary": "#ff7f0e"}


@dataclass
class Cell:
    """The aggregate of one (family, size, method)."""

    n: int
    score: float
    stderr: float
    cost: float | None  # mean USD per item; None when any cost is unknown
    tokens: float
    calls: float
    latency: float
    truncated: int
    errors: int


def aggregate(records: list[dict[str, Any]]) -> dict[str, dict[tuple[int, str], Cell]]:
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for record in latest(records).values():
        groups[(record["family"], record["size_tokens"], record["method"])].append(record)
    out: dict[str, dict[tuple[int, str], Cell]] = defaultdict(dict)
    for (fam, size, method), rows in groups.items():
        scores = [float(r["score"]) for r in rows]
        costs = [r["usage"].get("cost_usd") for r in rows]
        out[fam][(size, method)] = Cell(
            n=len(rows),
            score=statistics.fmean(scores),
            stderr=statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else 0.0,
            cost=None if any(c is None for c in costs) else statistics.fmean(costs),
            tokens=statistics.fmean(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in rows),
            calls=statistics.fmean(r["usage"]["calls"] for r in rows),
            latency=statistics.fmean(r["elapsed_s"] for r in rows),
            truncated=sum(1 for r in rows if r.get("truncated")),
            errors=sum(1 for r in rows if r.get("status") != "ok" or r.get("stopped_by") == "error"),
        )
    return out


def _methods(cells: dict[tuple[int, str], Cell]) -> list[str]:
    present = {m for _, m in cells}
    return [m for m in METHODS if m in present]


def _sizes(cells: dict[tuple[int, str], Cell]) -> list[int]:
    return sorted({s for s, _ in cells})


def _table(cells: dict[tuple[int, str], Cell], value: Any, title: str) -> list[str]:
    sizes = _sizes(cells)
    lines = [
        f"| {title} | " + " | ".join(size_label(s) for s in sizes) + " |",
        "|---" * (len(sizes) + 1) + "|",
    ]
    for method in _methods(cells):
        row = [value(cells[(s, method)]) if (s, method) in cells else "" for s in sizes]
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    return lines


def _score(cell: Cell) -> str:
    flags = []
    if cell.truncated:
        flags.append(f"{cell.truncated} truncated")
    if cell.errors:
        flags.append(f"{cell.errors} errors")
    extra = f" ({', '.join(flags)})" if flags else ""
    return f"{cell.score:.3f} ± {cell.stderr:.3f} (n={cell.n}){extra}"


def _cost(cell: Cell) -> str:
    cost = "n/a" if cell.cost is None else f"${cell.cost:.4f}"
    return f"{cost} · {cell.tokens:,.0f} tok · {cell.calls:.1f} calls · {cell.latency:.2f} s"


def asked_variants(out: Path) -> dict[str, str]:
    """The variant each family was asked for, from the run's `config.json` ({} when it is absent)."""
    try:
        identity = json.loads((out / "config.json").read_text(encoding="utf-8")).get("identity", {})
    except (OSError, ValueError):
        return {}
    variants = identity.get("variants") if isinstance(identity, dict) else None
    return dict(variants) if isinstance(variants, dict) else {}


def write_report(out: Path, *, plots: bool | None = None) -> Path:
    """Write `report.md` (and `plot-<family>.png` files) in `out` from its results; returns the report.
    `plots` None: the plots when matplotlib is installed, else the report says they were skipped."""
    records = load_records(out)
    if not records:
        raise ConfigError(f"no results in {out}: run the eval with `out`={out} first")
    if plots is None:
        plots = plots_available()
        skipped = not plots
    else:
        skipped = False
    data = aggregate(records)
    asked = asked_variants(out)
    first = records[0]
    lines = [
        "# rlmx eval report",
        "",
        f"Root model `{first['model']}`, sub-model `{first['sub_model']}`; "
        f"{len(latest(records))} scored runs; results in `results.jsonl`.",
        "Scores are means over items with their standard error; cost and tokens are per item "
        "(all calls of the method, sub-calls included); latency is wall-clock seconds per item.",
        "",
    ]
    if skipped:
        lines += [PLOTS_MISSING.capitalize() + ".", ""]
    for fam in sorted(data):
        cells = data[fam]
        own = [r for r in records if r["family"] == fam]
        variants = sorted({r["variant"] for r in own})  # the variant each item was built from, not asked
        used = sorted({r["source"] for r in own if r.get("source")})
        lines += [f"## {fam} ({', '.join(variants)})", ""]
        wanted = asked.get(fam)
        if wanted and variants != [wanted]:
            built = ", ".join(v for v in variants if v != wanted)
            lines += [
                f"Asked for variant {wanted}; built {built} instead (its text source is not installed).",
                "",
            ]
        if len(used) == 1:
            lines += [f"Text source: {used[0]}.", ""]
        elif used:
            lines += ["Text sources:", "", *(f"- {source}" for source in used), ""]
        lines += _table(cells, _score, "score")
        lines += ["", *_table(cells, _cost, "cost · tokens · calls · latency"), ""]
        paper = PAPER.get(fam)
        if paper:
            ref = ", ".join(f"{m} {v:.3f}" for m, v in paper.scores.items())
            costs = ", ".join(f"{m} ${v:.2f}" for m, v in paper.costs.items())
            lines += [f"Paper ({paper.benchmark}): {ref}; mean cost {costs}. {paper.note}".rstrip(), ""]
        if plots:
            image = plot_family(out, fam, cells)
            lines += [f"![{fam}]({image.name})", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def plot_family(out: Path, fam: str, cells: dict[tuple[int, str], Cell]) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("plots need matplotlib: pip install 'rlmx[evals]'") from exc
    sizes = _sizes(cells)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    priced = all(c.cost is not None for c in cells.values())
    panels = [
        ("score", lambda c: c.score, "score (0-1)"),
        (
            "cost",
            lambda c: c.cost if priced else c.tokens,
            "USD per item" if priced else "tokens per item (no prices)",
        ),
        ("latency", lambda c: c.latency, "seconds per item"),
    ]
    for ax, (name, value, label) in zip(axes, panels, strict=True):
        plotted: list[float] = []
        for method in _methods(cells):
            xs = [s for s in sizes if (s, method) in cells]
            ys = [value(cells[(s, method)]) for s in xs]
            plotted += ys
            ax.plot(xs, ys, marker="o", label=method, color=COLOURS.get(method))
        paper = PAPER.get(fam)
        if paper and name in ("score", "cost"):
            figures = paper.scores if name == "score" else paper.costs
            lo, hi = paper.tokens
            for method, figure in figures.items():
                if name == "cost" and not priced:
                    continue  # our axis shows tokens then; the paper's dollars would not fit it
                mid = math.sqrt(lo * hi)
                ax.plot([lo, hi], [figure, figure], color=COLOURS.get(method), alpha=0.5, linewidth=4)
                ax.plot([mid], [figure], marker="*", markersize=12, color=COLOURS.get(method), linestyle="none",
                        label=f"paper {method}" if name == "score" else None)  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("context size (tokens)")
        ax.set_ylabel(label)
        ax.set_title(f"{fam}: {name}")
        if name == "score":
            ax.set_ylim(-0.05, 1.05)
        elif plotted and min(plotted) > 0:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = out / f"plot-{fam}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
