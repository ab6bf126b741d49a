"""Contexts in whole runs: files read by the worker, the metadata the model sees, REPL helpers over
documents, children sharing the loaded context, the pre-filter, and `rlmx ask` with folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policies import is_child, is_forced_final, is_rlm, repl, turn
from rlmx import RLM, Limits
from rlmx.context import Context
from rlmx.context.metadata import describe
from rlmx.testing import FunctionLM, ScriptedServer


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # search indexes of these runs


@pytest.fixture()
def logs(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for day in range(1, 13):
        folder = root / f"2025-{day:02d}"
        folder.mkdir(parents=True)
        lines = [f"2025-{day:02d}-{d:02d} INFO worker-{d % 4} processed batch {d * 7}" for d in range(1, 29)]
        if day == 7:
            lines[10] = "2025-07-11 ERROR worker-3 disk quota exceeded on /var/data"
        (folder / "app.log").write_text("\n".join(lines) + "\n")
    (root / "2025-03" / "core.dump").write_bytes(b"\x7fELF\x00\x00" * 50)
    return root


def user_text(messages: list[dict[str, Any]]) -> str:
    return str(messages[1]["content"])


def last_output(messages: list[dict[str, Any]]) -> str:
    return str(messages[-1]["content"])


def test_folder_run_metadata_and_helpers(logs: Path) -> None:
    seen: dict[str, str] = {}
    code = """
hits = grep(r"ERROR")
print([(m.path, m.line_no, m.line) for m in hits])
found = search("disk quota", k=1)[0]
print(found.path, "disk quota" in found.text)
print(count_tokens(context[0]["text"]) > 0, count_tokens("hello world"))
parts = partition(by="documents", n=3)
print([len(p) for p in parts])
pieces = partition(by="tokens", size=400)
print(len(pieces), max(count_tokens(p) for p in pieces) <= 400)
print(repr(peek(0, 40)))
result = {"path": hits[0].path, "line": hits[0].line_no, "docs": len(context)}
"""

    def model(messages: list[dict[str, Any]], settings: Any) -> str:
        if turn(messages) == 0:
            seen["meta"] = user_text(messages)
            return repl(code)
        seen["output"] = last_output(messages)
        return "FINAL_VAR(result)"

    result = RLM(FunctionLM(model), trace=False).run("Which worker hit an error?", Context.from_paths(logs))
    assert result.stopped_by == "final", result.error
    assert result.answer == {"path": "2025-07/app.log", "line": 11, "docs": 12}
    meta = seen["meta"]
    assert "list of 12 documents" in meta and "characters in all" in meta and "bytes on disk" not in meta
    assert "Left out 1 file (1 binary), e.g. 2025-03/core.dump: binary" in meta
    assert "ERROR" not in meta and "disk quota" not in meta  # sizes and paths only, never content
    out = seen["output"]
    assert "[('2025-07/app.log', 11, '2025-07-11 ERROR worker-3 disk quota exceeded on /var/data')]" in out
    assert "2025-07/app.log True" in out
    assert "True 2" in out and "[4, 4, 4]" in out
    assert "'=== 2025-01/app.log ===\\n2025-01-01 INFO " in out  # peek: the text view of the documents


def test_children_share_the_loaded_files_without_reading_them_again(logs: Path) -> None:
    """The root's worker reads the files once; after they change on disk, a child (context=None)
    still sees what was loaded: it shares the loaded copy instead of re-reading or re-sending it."""
    child_meta: list[str] = []

    def model(messages: list[dict[str, Any]], settings: Any) -> str:
        if not is_rlm(settings):
            return "sub"
        if is_forced_final(settings):
            return "FINAL(forced)"
        question = user_text(messages)
        if is_child(settings):  # the child RLM, asked "child task: ..."
            if turn(messages) == 0:
                child_meta.append(question)
                return repl("child_view = context[6]['text'].splitlines()[10]\nprint(len(context))")
            return "FINAL_VAR(child_view)"
        if turn(messages) == 0:
            return repl("print(len(context), context[6]['path'])")
        if turn(messages) == 1:
            for path in logs.rglob("*.log"):  # the host's files change after the load
                path.write_text("rewritten\n")
            return repl("answer = rlm_query('child task: read line 11 of document 7')\nprint(answer)")
        return "FINAL_VAR(answer)"

    rlm = RLM(FunctionLM(model), trace=False, limits=Limits(max_depth=2))
    result = rlm.run("What happened in July?", Context.from_paths(logs))
    assert result.stopped_by == "final", result.error
    assert result.answer == "2025-07-11 ERROR worker-3 disk quota exceeded on /var/data"
    assert len(child_meta) == 1 and "list of 12 documents" in child_meta[0]


def test_prefilter_narrows_and_says_so() -> None:
    docs = [
        {"path": f"doc{i:03d}.txt", "text": f"routine entry number {i} with nothing special\n" * 40}
        for i in range(60)
    ]
    docs[42]["text"] += "The vault combination is 31-07-88, kept by the night porter.\n"
    seen: dict[str, str] = {}

    def model(messages: list[dict[str, Any]], settings: Any) -> str:
        if turn(messages) == 0:
            seen["meta"] = user_text(messages)
            return repl("print(len(context), [d['path'] for d in context])\nfirst = context[0]")
        seen["output"] = last_output(messages)
        return "FINAL_VAR(first)"

    rlm = RLM(FunctionLM(model), trace=False, prefilter="bm25:3")
    result = rlm.run("What is the vault combination?", docs)
    assert result.stopped_by == "final", result.error
    # only one chunk has the question's words (the others score 0): a view of 1, not of 3
    assert "FILTERED VIEW: the 1 chunk (of " in seen["meta"] and "60 documents" in seen["meta"]
    assert "list of 1 document " in seen["meta"]
    assert "doc042.txt" in seen["output"]
    answer = result.answer
    assert isinstance(answer, dict) and set(answer) == {"path", "line_no", "score", "text"}


def test_metadata_stays_small_for_huge_contexts() -> None:
    small = [{"path": "a.txt", "text": "x" * 1000}]
    huge = [{"path": f"dir{i % 97}/file{i}.txt", "text": "x" * (i % 5000)} for i in range(50_000)]
    assert len(describe(huge)) < 1_000 and len(describe(huge)) < 3 * len(describe(small))


def test_rlmx_ask_folder_with_globs_and_prefilter(logs: Path, tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "sub"
        if turn(messages) == 0:
            return repl("paths = sorted({d['path'] for d in context})\nprint(paths)")
        return "FINAL_VAR(paths)"

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    with ScriptedServer(policy) as srv:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "rlmx.cli", "ask", "Which day had a disk quota error?"),
                *("--context", str(logs), "--include", "2025-0[6-8]/*.log", "--prefilter", "bm25:1"),
                *("--model", "openai:scripted", "--base-url", srv.url, "--json", "--no-trace", "--quiet"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        first_prompt = srv.requests[0].messages[1]["content"]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"] == ["2025-07/app.log"]
    assert "FILTERED VIEW: the 1 chunk (of" in first_prompt and "3 documents" in first_prompt
    bad = subprocess.run(
        [
            *(
                sys.executable,
                "-m",
                "rlmx.cli",
                "ask",
                "q",
                "--context",
                str(logs),
                "--prefilter",
                "bm25:many",
            ),
            *("--model", "openai:scripted", "--base-url", "http://127.0.0.1:9"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "bm25:50" in bad.stderr


def test_rlmx_ask_reads_stdin_pdf_and_csv_together(tmp_path: Path) -> None:
    from test_loaders import make_pdf

    (tmp_path / "minutes.pdf").write_bytes(make_pdf(["Decision: ship on Friday"]))
    (tmp_path / "people.csv").write_text("name,role\nAda,lead\n")

    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        if turn(messages) == 0:
            return repl("seen = {d['path']: d['text'].strip() for d in context}")
        return "FINAL_VAR(seen)"

    with ScriptedServer(policy) as srv:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "rlmx.cli", "ask", "What was decided?", "-c", "-"),
                *("-c", str(tmp_path / "minutes.pdf"), "-c", str(tmp_path / "people.csv")),
                *("--model", "openai:scripted", "--base-url", srv.url, "--json", "--no-trace", "--quiet"),
            ],
            input="chat log: Ada agreed\n",
            capture_output=True,
            text=True,
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"] == {
        "<stdin>": "chat log: Ada agreed",
        str(tmp_path / "minutes.pdf"): "Decision: ship on Friday",
        str(tmp_path / "people.csv"): "name,role\nAda,lead",
    }
