"""The differential harness's own parts, without either runtime: how a request is classified and
reduced to its skeleton, and how the two sides' wordings meet (quick: no peer environment needed)."""

from __future__ import annotations

from typing import Any

from diff_compare import REWORDINGS, reword
from diff_harness import in_canonical_order, message_skeleton
from diff_policies import Script, kind_of

SYSTEM = {"role": "system", "content": "You are an RLM."}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_requests_are_told_apart_by_their_messages_alone() -> None:
    turn = [SYSTEM, user("Answer the following: q\n\nYour context is ..."), user("Turn 1/5:")]
    assert kind_of(turn, None) == "root"
    assert kind_of([user("What is 2+2?")], None) == "sub"
    assert kind_of([*turn, {"role": "assistant", "content": "Please answer now."}], None) == "final"
    assert (
        kind_of([*turn, {"role": "assistant", "content": "x"}, user("Summarize your progress")], None)
        == "summary"
    )
    child = [SYSTEM, user("Your context is a str of 18 characters."), user("Turn 1/5:")]
    assert kind_of(child, "ROOT-TASK") == "child"
    assert (
        kind_of([SYSTEM, user("Answer the following: ROOT-TASK: go"), user("Turn 1/5:")], "ROOT-TASK")
        == "root"
    )


def test_the_script_plays_root_turns_in_order_and_repeats_the_last() -> None:
    script = Script(root=["one", "two"], sub=lambda p: p.upper())
    turn = [SYSTEM, user("Turn 1/5:")]
    replies = [script(turn, None).text for _ in range(3)]
    assert replies == ["one", "two", "two"]
    reply = script([user("ping")], None)
    assert reply.text == "PING" and (reply.input_tokens, reply.output_tokens) == (100, 10)


def test_a_skeleton_keeps_the_framing_and_drops_the_prose() -> None:
    feedback = user(
        "REPL output:\n\nsome printed text\n\n\nZeroDivisionError: division by zero\n\n"
        "REPL variables: ['answer', 'x']\n... + [55 chars...]"
    )
    assert message_skeleton(feedback) == [
        "user",
        "REPL output:",
        "ZeroDivisionError: division by zero",
        "REPL variables: ['answer', 'x']",
        "<cut: 55 characters>",
    ]
    opening = user("Answer the following: q\n\nYour context is a str of 5 total characters.\nmore words")
    assert message_skeleton(opening) == [
        "user",
        "Answer the following: q",
        "Your context is a str of 5 total characters.",
    ]
    assert message_skeleton(SYSTEM) == ["system", "<system prompt>"]
    assert message_skeleton({"role": "assistant", "content": "Let me look.\n```repl\nx = 1\n```\n"}) == [
        "assistant",
        "Let me look.\n```repl\nx = 1\n```",
    ]


def test_both_wordings_of_a_line_meet_and_keep_their_facts() -> None:
    official = "Your context is a str of 6050175 total characters. Each sub-LLM call can handle roughly ~100k tokens at once."
    compat = "Your context is a str of 6,050,175 characters (about 1,512,544 tokens), 50,003 lines."
    assert (
        reword(official, "official")
        == reword(compat, "compat")
        == "<context description: str of 6050175 characters>"
    )
    assert reword("Your context is a str of 7 characters.", "compat") != reword(official, "official")
    assert reword("Turn 2/5:", "official") == "Turn 2/5:"  # a line no rewording names is compared as it is
    assert all(r.reason for r in REWORDINGS)


def test_a_batch_is_compared_in_a_canonical_order() -> None:
    def req(kind: str, text: str) -> dict[str, Any]:
        return {"kind": kind, "params": {}, "messages": [["user", text]]}

    sent = [req("root", "r1"), req("sub", "b"), req("sub", "a"), req("root", "r2"), req("sub", "z")]
    other = [req("root", "r1"), req("sub", "a"), req("sub", "b"), req("root", "r2"), req("sub", "z")]
    assert in_canonical_order(sent) == in_canonical_order(other)
    assert [r["kind"] for r in in_canonical_order(sent)] == ["root", "sub", "sub", "root", "sub"]
    assert in_canonical_order([req("root", "r2"), req("root", "r1")])[0]["messages"] == [["user", "r2"]]
