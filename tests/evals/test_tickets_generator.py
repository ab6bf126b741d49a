"""Tests for the support-tickets example generator (examples/support_tickets/generate.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.support_tickets.generate import (  # noqa: E402
    BILLING,
    OTHER,
    QUESTION,
    TARGET_USERS,
    Ticket,
    generate,
    main,
)

LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}) \| (\d{5,6}) \| ([^|]+)$")


@pytest.fixture(scope="module")
def default() -> tuple[str, int, list[Ticket]]:
    return generate()


def test_deterministic_per_seed(default: tuple[str, int, list[Ticket]]) -> None:
    assert generate(seed=0) == default
    other = generate(seed=1)
    assert other[0] != default[0]
    assert generate(seed=1) == other


def test_shape_and_counts(default: tuple[str, int, list[Ticket]]) -> None:
    text, _, tickets = default
    lines = text.splitlines()
    assert len(lines) == len(tickets) == 5000
    assert lines == [t.line() for t in tickets]
    for line in lines:
        match = LINE.match(line)
        assert match, line
        assert "2023-01-01" <= match.group(1) <= "2025-12-31"
    assert [t.date for t in tickets] == sorted(t.date for t in tickets)
    per_user = Counter(t.user_id for t in tickets if t.user_id in TARGET_USERS)
    assert 85 <= sum(per_user.values()) <= 115
    assert set(per_user) == set(TARGET_USERS)
    assert all(25 <= count <= 40 for count in per_user.values())


def test_gold_matches_recount(default: tuple[str, int, list[Ticket]]) -> None:
    text, gold, tickets = default
    assert gold == sum(1 for t in tickets if t.user_id in TARGET_USERS and t.billing)
    # Recount from the text itself, parsing the user field exactly.
    target_texts = [
        m.group(3) for m in map(LINE.match, text.splitlines()) if m and m.group(2) in TARGET_USERS
    ]
    assert len(target_texts) == sum(1 for t in tickets if t.user_id in TARGET_USERS)
    assert 20 <= gold <= 80
    assert 0 < gold < len(target_texts)


def test_near_miss_ids_and_distractors(default: tuple[str, int, list[Ticket]]) -> None:
    text, _, tickets = default
    users = {t.user_id for t in tickets}
    for near in ("123456", "678901", "111110"):
        assert near in users
    assert all(len(u) in (5, 6) and u.isdigit() for u in users)
    # Naive substring search over-counts the target users' tickets.
    naive = sum(1 for line in text.splitlines() if any(u in line for u in TARGET_USERS))
    exact = sum(1 for t in tickets if t.user_id in TARGET_USERS)
    assert naive > exact
    # Some billing tickets never say "bill", and some non-billing ones use money-adjacent words.
    assert any(t.billing and "bill" not in t.text.lower() for t in tickets)
    assert any(not t.billing and "charge" in t.text for t in tickets)


def test_texts_have_no_separator_and_match_labels(default: tuple[str, int, list[Ticket]]) -> None:
    _, _, tickets = default
    assert all("|" not in t.text and "\n" not in t.text and t.text for t in tickets)
    assert all(isinstance(t.billing, bool) for t in tickets)
    assert all("|" not in template for template in (*BILLING, *OTHER))
    assert len(set(BILLING)) >= 25 and len(set(OTHER)) >= 25
    billing_share = sum(t.billing for t in tickets) / len(tickets)
    assert 0.2 < billing_share < 0.5


def test_small_n() -> None:
    text, gold, tickets = generate(seed=5, n=40)
    assert len(tickets) == 40 == len(text.splitlines())
    assert gold == sum(1 for t in tickets if t.user_id in TARGET_USERS and t.billing)
    with pytest.raises(ValueError):
        generate(n=0)


def test_main_writes_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, gold_out = tmp_path / "tickets.txt", tmp_path / "gold.json"
    assert main(["--out", str(out), "--seed", "2", "--n", "300", "--gold-out", str(gold_out)]) == 0
    text, gold, _ = generate(seed=2, n=300)
    assert out.read_text(encoding="utf-8") == text
    assert json.loads(gold_out.read_text(encoding="utf-8")) == {"question": QUESTION, "answer": gold}
    assert capsys.readouterr().out.strip() == str(gold)


def test_runs_as_script(tmp_path: Path) -> None:
    out = tmp_path / "t.txt"
    script = ROOT / "examples" / "support_tickets" / "generate.py"
    result = subprocess.run(
        [sys.executable, str(script), "--out", str(out), "--n", "200"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert result.stdout.strip() == str(generate(n=200)[1])
    assert len(out.read_text(encoding="utf-8").splitlines()) == 200
