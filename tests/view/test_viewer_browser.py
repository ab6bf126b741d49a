"""The trace report in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright.

Locally the tests skip, saying why, when Playwright or Chromium is missing; under CI=true that is a
failure (scripts/test.sh installs both there). RLMX_CHROMIUM points at another Chromium binary;
RLMX_VIEWER_SCREENSHOT=path also saves the screenshot there (that is how docs/img/viewer.png is made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rlmx.trace
from observability_runs import depth2_policy, run_depth2
from policies import is_rlm
from rlmx.testing import ScriptedServer
from rlmx.view import report_data, write_report

CHROMIUM = os.environ.get("RLMX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
HOSTILE = "</script><script>window.pwned=1</script><img src=x onerror=window.pwned=2>"


def missing_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed: pip install -e '.[browser]'"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set RLMX_CHROMIUM)"
    return None


def hostile_policy(messages: list[dict[str, Any]], request: Any) -> Any:
    reply = depth2_policy(messages, request)
    if not is_rlm(request):
        reply.text = HOSTILE  # every plain sub-call answers with markup
    return reply


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Traces of depth-2 runs and their reports, made before the browser starts (Playwright's sync API
    keeps an event loop running, and RLM.run must not be called inside one)."""
    folder = tmp_path_factory.mktemp("browser")
    out = {}
    for name, policy in (("depth2", depth2_policy), ("hostile", hostile_policy)):
        trace_path = folder / f"{name}.jsonl"
        with ScriptedServer(policy) as srv:
            assert run_depth2(srv, trace_path).stopped_by == "final"
        out[name] = trace_path
        out[f"{name}.html"] = write_report(trace_path, folder / f"{name}.html")
    return out


@pytest.fixture(scope="module")
def browser(reports: dict[str, Path]) -> Iterator[Any]:
    problem = missing_browser()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the viewer's browser test must run in CI, but: {problem}")
        pytest.skip(f"viewer browser test skipped: {problem}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def open_report(browser: Any, html: Path) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.on(
        "request", lambda req: None if req.url.startswith(("file:", "data:")) else problems.append(req.url)
    )
    page.goto(html.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    return page, problems


def row(page: Any, kind: str, text: str) -> Any:
    return page.locator(f".node[data-kind='{kind}'] > .row", has_text=text).first


def test_the_tree_shows_a_childs_turns_after_expanding_it(
    reports: dict[str, Path], browser: Any, tmp_path: Path
) -> None:
    trace_path = reports["depth2"]
    page, problems = open_report(browser, reports["depth2.html"])

    summary = page.inner_text("#summary")
    usage = rlmx.trace.load(trace_path).usage()
    assert "final" in summary and f"{usage['calls']}" in summary and f"${usage['cost_usd']:.4f}" in summary
    children = page.locator(".node[data-kind='rlm'][data-depth='1']")
    assert children.count() == 0  # collapsed: nothing below the root's turns is drawn yet

    row(page, "turn", "Turn 1").click()
    row(page, "cell", "code: notes = llm_query_batched").click()
    row(page, "batch", "rlm_query_batched × 2").click()
    assert children.count() == 2
    child_turns = page.locator(".node[data-kind='rlm'][data-depth='1'] .node[data-kind='turn']")
    assert child_turns.count() == 0

    row(page, "rlm", "Child RLM: child A").click()
    assert child_turns.count() == 2
    assert [t.strip() for t in child_turns.locator(":scope > .row .label").all_inner_texts()] == [
        "Turn 1",
        "Turn 2",
    ]
    assert child_turns.first.is_visible()
    # one level further: the child's code cell and the depth-2 sub-calls it made
    child_turns.first.locator(":scope > .row").click()
    child_turns.first.locator(".node[data-kind='cell'] > .row").first.click()
    cell_text = child_turns.first.inner_text()
    assert "parts = llm_query_batched" in cell_text and "leaf: part one of alpha text" in cell_text
    child_turns.first.locator(".node[data-kind='batch'] > .row").first.click()
    batch = child_turns.first.locator(".node[data-kind='batch']").first
    assert batch.locator(".node[data-kind='sub'][data-depth='2']").count() == 2
    # with the fallback call of its rlm_query (at max depth), three depth-2 calls are on screen
    assert page.locator(".node[data-kind='sub'][data-depth='2']").count() == 3

    page.mouse.move(0, 0)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
    assert (tmp_path / "viewer.png").stat().st_size > 20_000
    if os.environ.get("RLMX_VIEWER_SCREENSHOT"):
        shutil.copy(tmp_path / "viewer.png", os.environ["RLMX_VIEWER_SCREENSHOT"])
    assert problems == []


def test_search_finds_and_reveals_a_collapsed_node(reports: dict[str, Path], browser: Any) -> None:
    trace_path, html = reports["depth2"], reports["depth2.html"]
    needle = "part one of beta"
    nodes = report_data(rlmx.trace.load(trace_path))["nodes"]
    expected = sum(
        1
        for n in nodes
        if needle in "\n".join([n["l"], n.get("m", ""), *(s[1] for s in n.get("x", []))]).lower()
    )
    assert expected > 0
    page, problems = open_report(browser, html)
    page.fill("#search", needle)
    page.wait_for_function("document.getElementById('search-count').textContent.length > 0", timeout=10_000)
    assert page.inner_text("#search-count") == f"{expected} match" + ("es" if expected != 1 else "")
    hits = page.locator("#results .hit")
    assert hits.count() == expected
    target = hits.last.get_attribute("data-i")
    hits.last.click()
    revealed = page.locator(f".node[data-i='{target}']")
    assert revealed.count() == 1 and revealed.is_visible()
    assert needle in revealed.inner_text().lower()
    assert problems == []


def test_hostile_trace_text_is_shown_as_text_and_never_runs(reports: dict[str, Path], browser: Any) -> None:
    page, problems = open_report(browser, reports["hostile.html"])
    row(page, "turn", "Turn 1").click()
    row(page, "cell", "code: notes").click()
    row(page, "batch", "llm_query_batched × 3").click()
    page.locator(".node[data-kind='sub'] > .row").first.click()
    assert HOSTILE in page.locator(".node[data-kind='sub']").first.inner_text()
    assert page.evaluate("window.pwned === undefined")
    assert problems == []
