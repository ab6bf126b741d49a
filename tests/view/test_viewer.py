"""`rlmx view`: one self-contained HTML file with the summary, timeline and the nested call tree."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rlmx.trace
from observability_runs import depth2_policy, run_depth2
from policies import is_rlm
from rlmx.testing import ScriptedServer
from rlmx.trace import Exec
from rlmx.view import render_html, report_data

HOSTILE = "</script><script>window.pwned=1</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("viewer") / "run.jsonl"
    with ScriptedServer(depth2_policy) as srv:
        assert run_depth2(srv, path).stopped_by == "final"
    return path


def embedded(html: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="rlmx-data">(.*?)</script>', html, re.DOTALL)
    assert match, "no embedded data"
    return json.loads(match.group(1))


def test_report_is_one_self_contained_file(trace_path: Path) -> None:
    html = render_html(rlmx.trace.load(trace_path))
    assert "__CSS__" not in html and "__JS__" not in html and "__DATA__" not in html
    # nothing is fetched: no external scripts, stylesheets, images or fonts
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    data = embedded(html)
    assert data["summary"]["stopped_by"] == "final" and data["summary"]["calls"] == 15


def test_tree_nests_children_under_their_batch_and_costs_add_up(trace_path: Path) -> None:
    trace = rlmx.trace.load(trace_path)
    data = report_data(trace)
    nodes = data["nodes"]
    root = nodes[0]
    assert root["k"] == "rlm" and root["c"] == pytest.approx(trace.usage()["cost_usd"])

    def kids(i: int, kind: str | None = None) -> list[int]:
        return [c for c in nodes[i]["ch"] if kind is None or nodes[c]["k"] == kind]

    turns = kids(0, "turn")
    assert [nodes[t]["l"] for t in turns] == ["Turn 1", "Turn 2"]
    (cell,) = kids(turns[0], "cell")
    batches = kids(cell, "batch")
    assert [nodes[b]["l"] for b in batches] == ["llm_query_batched × 3", "rlm_query_batched × 2"]
    assert len(kids(batches[0], "sub")) == 3
    children = kids(batches[1], "rlm")
    assert sorted(nodes[c]["l"] for c in children) == ["Child RLM: child A", "Child RLM: child B"]
    for child in children:
        assert [nodes[t]["l"] for t in kids(child, "turn")] == ["Turn 1", "Turn 2"]
        assert nodes[child]["d"] == 1
    # every node's cost is the sum of its children's (notes and own calls included)
    for i, node in enumerate(nodes):
        if node["k"] in ("rlm", "turn", "cell", "batch") and node["ch"]:
            total = sum(nodes[c]["c"] or 0.0 for c in node["ch"] if nodes[c]["k"] != "note")
            assert node["c"] == pytest.approx(total), (i, node["l"])
    # the timeline has every model call and code cell, placed by depth
    kinds = [item[3] for item in data["timeline"]]
    assert kinds.count(0) + kinds.count(1) == len(trace.lm_calls())
    assert kinds.count(2) == len(trace.of_type(Exec))
    assert {item[2] for item in data["timeline"]} == {0, 1, 2}


def test_trace_text_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> Any:
        reply = depth2_policy(messages, request)
        if not is_rlm(request):  # every plain sub-call answers with markup
            reply.text = HOSTILE
        return reply

    path = tmp_path / "hostile.jsonl"
    with ScriptedServer(policy) as srv:
        run_depth2(srv, path)
    html = render_html(rlmx.trace.load(path))
    assert HOSTILE not in html and "</script><script>window.pwned" not in html
    assert html.count("</script>") == 2  # the data element and the code element, nothing injected
    assert HOSTILE in json.dumps(embedded(html))


def test_view_command_writes_the_report_and_fails_clearly_without_a_trace(
    trace_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "rlmx.cli", "view", str(trace_path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out) and out.stat().st_size > 10_000
    assert embedded(out.read_text())["summary"]["run_id"] == rlmx.trace.load(trace_path).run_start.run_id
    missing = subprocess.run(
        [sys.executable, "-m", "rlmx.cli", "view", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and missing.stderr.startswith("rlmx: error: no trace file at")
    not_a_trace = tmp_path / "notes.jsonl"
    not_a_trace.write_text('{"hello": 1}\n')
    bad = subprocess.run(
        [sys.executable, "-m", "rlmx.cli", "view", str(not_a_trace)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "not an rlmx trace record" in bad.stderr


def test_default_output_sits_beside_the_trace(trace_path: Path, tmp_path: Path) -> None:
    from rlmx.view import write_report

    copy = tmp_path / "copy.jsonl"
    copy.write_text(trace_path.read_text())
    assert write_report(copy) == tmp_path / "copy.html" and (tmp_path / "copy.html").exists()
