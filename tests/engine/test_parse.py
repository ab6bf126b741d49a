"""Reading model replies: which code runs, and when a FINAL line ends the run."""

from __future__ import annotations

from rlmx.answer import Answer
from rlmx.engine.parse import parse_reply


def test_repl_python_and_unlabelled_fences_run_in_order_others_do_not() -> None:
    reply = (
        "```repl\na = 1\n```\ntext\n```python\nb = 2\n```\n```\nc = 3\n```\n"
        '```json\n{"x": 1}\n```\n```bash\nls\n```\n'
    )
    assert parse_reply(reply).code_blocks == ["a = 1\n", "b = 2\n", "c = 3\n"]


def test_final_on_its_own_line_in_prose() -> None:
    assert parse_reply("Done.\nFINAL(42)\n").final == Answer("42", "final")
    assert parse_reply('FINAL("a quoted answer")').final == Answer("a quoted answer", "final")
    assert parse_reply("  FINAL_VAR(result)  ").final == Answer(source="final_var", var="result")
    assert parse_reply("FINAL_VAR('result')").final == Answer(source="final_var", var="result")


def test_final_may_span_lines() -> None:
    parsed = parse_reply("FINAL(first line\nsecond line)\n")
    assert parsed.final == Answer("first line\nsecond line", "final")


def test_final_inside_code_strings_comments_or_sentences_is_ignored() -> None:
    reply = '```repl\ns = "FINAL(42)"\n# FINAL(1)\nFINAL_VAR_NAME = 3\n```\nI will call FINAL(x) later.\n'
    parsed = parse_reply(reply)
    assert parsed.final is None and len(parsed.code_blocks) == 1
    assert parse_reply("print(FINAL(3))").final is None
    assert parse_reply("The answer: FINAL(3)").final is None


def test_code_and_final_line_together() -> None:
    parsed = parse_reply("```repl\nx = 1\n```\nFINAL_VAR(x)")
    assert parsed.code_blocks == ["x = 1\n"] and parsed.final == Answer(source="final_var", var="x")
