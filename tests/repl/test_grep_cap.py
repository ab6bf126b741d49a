"""grep's cap is never silent: a capped result carries `truncated` and `total` (a counting scan that builds
no Match), `count_all=False` stops at the cap ("at least"), `max_matches=None` returns every line, and a
cell whose result a default cap cut gets one `[rlmx]` notice line (none when the caller chose the cap;
the same for peek's default length). The notices are checked through the real worker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rlmx import SandboxSettings
from rlmx.context.payload import ContextPayload
from rlmx.repl import helpers
from rlmx.repl.helpers import GrepResult, TextView, grep
from rlmx.sandbox import open_sandboxes
from rlmx.sandbox.frames import ReplOptions

N_MATCH = 200_000
BIG = "".join(f"{i} ERROR disk {i % 7}\n{i} INFO ok\n" for i in range(N_MATCH))


def big_view() -> TextView:
    view = TextView(BIG)
    view.build_line_index()
    return view


def test_default_cap_reports_the_exact_total_of_a_big_text() -> None:
    view = big_view()
    result = grep(view, "ERROR")
    assert isinstance(result, list) and isinstance(result, GrepResult)
    assert len(result) == 1000 and result.truncated and result.exact
    assert result.total == N_MATCH
    assert [m.line_no for m in result[:3]] == [1, 3, 5] and result[-1].line == "999 ERROR disk 5"
    assert result.notice(1000) == (
        "grep: 1,000 of 200,000 matching lines shown (max_matches=1000); "
        "grep(..., max_matches=None) returns all, len(result) / result.total counts"
    )


def test_the_count_builds_no_match_beyond_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    built = []

    class Counting(helpers.Match):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            built.append(1)
            super().__init__(*args)

    monkeypatch.setattr(helpers, "Match", Counting)
    result = grep(big_view(), "ERROR")
    assert result.total == N_MATCH and len(built) == 1000


def test_count_all_false_stops_at_the_cap_and_says_at_least() -> None:
    result = grep(big_view(), "ERROR", count_all=False)
    assert len(result) == 1000 and result.truncated and not result.exact
    assert result.total == 1001  # a lower bound: the cap and the one line past it
    assert "1,000 of at least 1,001 matching lines" in result.notice(1000)


def test_max_matches_none_returns_every_line() -> None:
    result = grep(big_view(), r"disk 3$", max_matches=None)
    assert len(result) == result.total == len(range(3, N_MATCH, 7))
    assert not result.truncated and result[-1].line.endswith("disk 3")


def test_a_result_the_cap_did_not_cut_is_not_truncated() -> None:
    text = "".join(f"x{i}\n" for i in range(1000))
    result = grep(TextView(text), "x")
    assert len(result) == result.total == 1000 and not result.truncated
    counted = grep(TextView(text), "x", max_matches=0)
    assert counted == [] and counted.total == 1000 and counted.truncated


@pytest.mark.parametrize("cap", [0, 1, 2, 3])
def test_the_total_follows_grep_own_line_rules_in_documents(cap: int) -> None:
    # header lines (=== ERROR.log ===) are not reported, so they are not counted either
    docs = [{"path": f"ERROR{i}.log", "text": "ERROR a\nok\nERROR b ERROR c\n"} for i in range(3)]
    full = grep(TextView(docs), "ERROR", max_matches=None)
    assert len(full) == 6 and all(m.line.startswith("ERROR") for m in full)
    capped = grep(TextView(docs), "ERROR", max_matches=cap)
    assert capped.total == 6 and capped.truncated and [str(m) for m in capped] == [str(m) for m in full[:cap]]


# --- the notice, through the real worker --------------------------------------------------------------


def run_cells(backend: str, cells: list[str], context: Any) -> list[str]:
    """The output of each cell, run in order in one REPL of `backend`."""

    async def rpc(method: str, params: dict[str, Any]) -> Any:
        raise AssertionError(f"no sub-call expected, got {method}")

    async def scenario() -> list[str]:
        boxes = open_sandboxes(SandboxSettings(backend=backend))
        box = boxes()
        try:
            await box.start(ContextPayload.of(context), ReplOptions())
            return [(await box.execute(code, rpc)).output for code in cells]
        finally:
            await box.close()
            await boxes.aclose()

    return asyncio.run(scenario())


@pytest.mark.parametrize("backend", ["local", "process"])
def test_a_default_cap_adds_one_notice_line_and_a_chosen_one_none(backend: str) -> None:
    outputs = run_cells(
        backend,
        [
            'r = grep("ERROR")\nprint(len(r), r.total, r.truncated)',
            'print(len(grep("ERROR", max_matches=1000)))',
            'print(len(grep("ERROR", count_all=False)))',
            'print(len(grep("ERROR", max_matches=None)))',
            'print(len(grep("disk 3$")) < 1000)',
            'for p in ("ERROR", "INFO", "disk"):\n    print(grep(p).total)',
        ],
        BIG,
    )
    assert outputs[0] == (  # the notice is written when grep returns, before what the cell prints
        "[rlmx] grep: 1,000 of 200,000 matching lines shown (max_matches=1000); "
        "grep(..., max_matches=None) returns all, len(result) / result.total counts\n1000 200000 True\n"
    )
    assert outputs[1] == "1000\n"
    assert outputs[2].startswith("[rlmx] grep: 1,000 of at least 1,001 matching lines shown")
    assert outputs[2].endswith("\n1000\n") and outputs[2].count("\n") == 2
    assert outputs[3] == f"{N_MATCH}\n"
    assert outputs[5].count("[rlmx]") == 1 and outputs[5].endswith("\n200000\n200000\n200000\n")
    assert outputs[5].startswith("[rlmx] grep: 1,000 of 200,000 matching lines")  # the first cut, once a cell
    assert outputs[4].startswith(
        f"[rlmx] grep: 1,000 of {len(range(3, N_MATCH, 7)):,} matching lines"
    ) and outputs[4].endswith("\nFalse\n")


def test_peek_says_when_its_default_length_cut_the_text() -> None:
    outputs = run_cells(
        "local",
        ["x = peek()", "x = peek(0, 2000)", "x = peek(-10)", "x = peek(len(context) - 2500)"],
        BIG,
    )
    size = f"{len(BIG):,}"
    assert (
        outputs[0]
        == f"[rlmx] peek: characters 0-2,000 of {size} shown (length=2000); peek(start, length) shows others\n"
    )
    assert outputs[1:] == ["", "", outputs[3]] and outputs[3].startswith("[rlmx] peek: characters ")
    assert run_cells("local", ["print(len(peek()))"], "short text") == ["10\n"]
