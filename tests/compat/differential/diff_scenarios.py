"""The scenarios of the differential tests (issue 27, "Proof against the real package").

Each one is the same `RLM(...)` keyword arguments, the same `completion` calls and the same scripted
model for both sides. Model turns are `repl` blocks written for the official runtime's contract (the
`answer` dict); what each scenario checks is in its `about`.
"""

from __future__ import annotations

from diff_kit import CTX, Scenario, answer, loop_script, repl, sub_call_script
from diff_policies import Script
from diff_scenarios_extra import EXTRA

# the issue's list, in its order
ISSUE_27: list[Scenario] = [
    Scenario(
        "sub_call",
        "llm_query from model code; its reply becomes the answer",
        sub_call_script,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
    ),
    Scenario(
        "out_of_iterations",
        "no answer in max_iterations=2 turns: the runtime asks once more for a final answer",
        loop_script(repl("print('still looking')")),
        [{"prompt": CTX, "root_prompt": "Find it."}],
        rlm={"max_iterations": 2},
    ),
    Scenario(
        "custom_tools",
        "a function tool, a {'tool', 'description'} tool and a constant, called from model code",
        lambda: Script(
            root=[
                repl("n = word_count(context) + lookup('beta') + LIMIT", "print(n)"),
                repl(*answer("str(n)")),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Count."}],
        tools="basic",
    ),
    Scenario(
        "depth_2",
        "max_depth=2: rlm_query starts a child RLM (its context is the prompt), whose rlm_query is a plain call",
        lambda: Script(
            root=[repl("r = rlm_query('CHILD-TASK: say hi')", "print(r)"), repl(*answer("r"))],
            child=[repl("s = rlm_query('LEAF: ping')", *answer("context[:10] + '/' + s"))],
            root_marker="ROOT-TASK",
            sub="pong",
        ),
        [{"prompt": CTX, "root_prompt": "ROOT-TASK: delegate."}],
        rlm={"max_depth": 2},
        callbacks=True,
    ),
    Scenario(
        "non_string_answer",
        "answer['content'] set to a dict: the response is its str()",
        lambda: Script(root=[repl(*answer("{'n': 3, 'items': [1, 2]}"))]),
        [{"prompt": CTX, "root_prompt": "Structure."}],
    ),
    Scenario(
        "dict_context",
        "a dict prompt: the REPL's context is the dict",
        lambda: Script(
            root=[
                repl(
                    "print(type(context).__name__, sorted(context))",
                    *answer("str(sum(len(v.split()) for v in context.values()))"),
                )
            ]
        ),
        [{"prompt": {"doc1": "alpha", "doc2": "beta gamma"}, "root_prompt": "How many words?"}],
    ),
    Scenario(
        "message_list_context",
        "a list of chat messages as the prompt: the REPL's context as the code sees it",
        lambda: Script(root=[repl(*answer("repr(context)"))]),
        [
            {
                "prompt": [
                    {"role": "user", "content": "hello there"},
                    {"role": "assistant", "content": "hi"},
                ],
                "root_prompt": "Who spoke first?",
            }
        ],
    ),
    Scenario(
        "with_root_prompt",
        "the same with root_prompt: the question goes into the first user message",
        lambda: Script(root=[repl(*answer("context.split()[-1].strip('.')"))]),
        [{"prompt": "The secret is 42.", "root_prompt": "What is the secret?"}],
    ),
    Scenario(
        "without_root_prompt",
        "completion(prompt) alone: the prompt is the context, no question",
        lambda: Script(root=[repl(*answer("context.split()[-1].strip('.')"))]),
        [{"prompt": "The secret is 42."}],
    ),
    Scenario(
        "max_errors",
        "max_errors=2 and every block raises: ErrorThresholdExceededError after the second turn",
        loop_script(repl("1 / 0", text="Try.")),
        [{"prompt": CTX, "root_prompt": "Divide."}],
        rlm={"max_errors": 2},
    ),
    Scenario(
        "error_then_recovery",
        "an error, a clean turn (the count resets), an error, then the answer: no exception",
        lambda: Script(
            root=[
                repl("undefined_name"),
                repl("print('fine')"),
                repl("1 / 0"),
                repl(*answer("'recovered'")),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Recover."}],
        rlm={"max_errors": 2},
    ),
    Scenario(
        "logger_memory",
        "RLMLogger() in memory: the trajectory in metadata; the on_* callbacks",
        sub_call_script,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        logger="memory",
        callbacks=True,
    ),
    Scenario(
        "logger_dir",
        "RLMLogger(log_dir=...): the JSONL records' types and keys",
        sub_call_script,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        logger="dir",
    ),
    Scenario(
        "python_fence",
        "a ```python block is not run by the official runtime; the ```repl block after it is",
        lambda: Script(
            root=[
                "```python\nanswer['content'] = 'from-python-fence'\nanswer['ready'] = True\n```",
                repl(*answer("'from-repl'")),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Which fence?"}],
    ),
    Scenario(
        "final_text",
        "FINAL(...) in the reply's text is not an ending in the official runtime",
        lambda: Script(root=["FINAL(from-final-text)", repl(*answer("'from-repl'"))]),
        [{"prompt": CTX, "root_prompt": "Finish."}],
    ),
    Scenario(
        "answer_rebound",
        "answer rebound to a str (restored to the dict), then to a plain ready dict (taken)",
        lambda: Script(
            root=[
                repl("answer = 'not a dict'", "print(isinstance(answer, dict))"),
                repl("print(isinstance(answer, dict))", "answer = {'content': 'rebound', 'ready': True}"),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Rebind."}],
    ),
    Scenario(
        "timeout",
        "max_timeout=4.5 s and root turns that take 3 s: TimeoutExceededError before the third turn",
        lambda: Script(root=[repl("print('slow')", text="Turn.")], root_delay_s=3.0),
        [{"prompt": CTX, "root_prompt": "Take your time."}],
        rlm={"max_timeout": 4.5},
    ),
    Scenario(
        "token_limit",
        "max_tokens=250, 110 tokens a call: TokenLimitExceededError after the third turn (330 tokens)",
        loop_script(repl("print('more')", text="Going on.")),
        [{"prompt": CTX, "root_prompt": "Spend."}],
        rlm={"max_tokens": 250},
    ),
    Scenario(
        "persistent",
        "persistent=True: a variable, context_1 and the first call's history reach the second call",
        lambda: Script(
            root=[
                repl("kept = 41", *answer("'one'")),
                repl(
                    "print(kept + 1, context_1, type(history).__name__)",
                    *answer("str(kept + 1) + ' ' + context_1"),
                ),
            ]
        ),
        [
            {"prompt": "first context", "root_prompt": "Q1"},
            {"prompt": "second context", "root_prompt": "Q2"},
        ],
        rlm={"persistent": True},
    ),
    Scenario(
        "compaction",
        "compaction=True at 5% of the window (6,400 tokens): a turn of two 19,000-character outputs passes it",
        lambda: Script(
            root=[
                repl("print('word ' * 3800)", text="Read a lot.") + "\n" + repl("print('more ' * 3800)"),
                repl(*answer("type(history).__name__ + ':' + str(len(history))")),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Compact."}],
        rlm={"compaction": True, "compaction_threshold_pct": 0.05},
    ),
]
SCENARIOS: list[Scenario] = [*ISSUE_27, *EXTRA]
BY_NAME = {s.name: s for s in SCENARIOS}
