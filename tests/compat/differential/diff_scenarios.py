"""The scenarios of the differential tests (issue 27, "Proof against the real package").

Each one is the same `RLM(...)` keyword arguments, the same `completion` calls and the same scripted
model for both sides. Model turns are `repl` blocks written for the official runtime's contract (the
`answer` dict); what each scenario checks is in its `about`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diff_policies import Script


def repl(*lines: str, text: str = "") -> str:
    body = "\n".join(lines)
    return f"{text}\n```repl\n{body}\n```" if text else f"```repl\n{body}\n```"


def answer(expr: str) -> list[str]:
    return [f"answer['content'] = {expr}", "answer['ready'] = True"]


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    script: Callable[[], Script]
    calls: list[dict[str, Any]]
    rlm: dict[str, Any] = field(default_factory=dict)
    tools: str | None = None
    logger: str | None = None  # None, "memory" or "dir"
    callbacks: bool = False
    keep_system: bool = False  # compare the system prompt's text too (a custom_system_prompt)
    concurrent: bool = False  # sub-RLMs run at once: the callbacks' order does not count
    interrupt_at_root: int | None = None  # SIGINT to the driver when this root turn (0-based) is asked for
    timeout_s: float = 180.0

    def rlm_kwargs(self) -> dict[str, Any]:
        base = {
            "backend": "openai",
            "backend_kwargs": {"model_name": "scripted", "api_key": "x"},
            "environment": "local",
            "max_iterations": 5,
        }
        return {**base, **self.rlm}


CTX = "alpha beta gamma\ndelta 7\n"


def _sub_call() -> Script:
    return Script(
        root=[
            repl("r = llm_query('What is 2+2? Reply with a number.')", "print(r)", text="Ask a sub-model."),
            repl(*answer("r")),
        ],
        sub="4",
    )


def _loop(turn: str) -> Callable[[], Script]:
    return lambda: Script(root=[turn])


SCENARIOS: list[Scenario] = [
    Scenario(
        "sub_call",
        "llm_query from model code; its reply becomes the answer",
        _sub_call,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
    ),
    Scenario(
        "batched_sub_calls",
        "llm_query_batched from model code: the replies in the prompts' order",
        lambda: Script(
            root=[
                repl("rs = llm_query_batched(['one', 'two', 'three'])", "print(rs)"),
                repl(*answer("'|'.join(rs)")),
            ],
            sub=lambda prompt: prompt.upper(),
        ),
        [{"prompt": CTX, "root_prompt": "Shout."}],
    ),
    Scenario(
        "other_backend",
        "other_backends / other_backend_kwargs: llm_query at depth 1 goes to the other model",
        _sub_call,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        rlm={
            "other_backends": ["openai"],
            "other_backend_kwargs": [{"model_name": "scripted-sub", "api_key": "x"}],
        },
    ),
    Scenario(
        "sampling_args",
        "sampling_args for the root model, sub_sampling_args for sub-calls: in each request's body",
        _sub_call,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        rlm={"sampling_args": {"temperature": 0.25, "max_tokens": 300}, "sub_sampling_args": {"top_p": 0.5}},
    ),
    Scenario(
        "sampling_args_any_key",
        "a sampling argument outside the common ones (seed) goes into the request body as it is",
        _sub_call,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        rlm={"sampling_args": {"seed": 7}},
    ),
    Scenario(
        "object_tool",
        "a tool value that is an object (not JSON data, not a function), in the default environment",
        lambda: Script(root=[repl("counter.bump()", *answer("str(counter.bump())"))]),
        [{"prompt": CTX, "root_prompt": "Count twice."}],
        tools="object",
    ),
    Scenario(
        "object_tool_in_process",
        "the same with environment_kwargs={'isolated': False} (ignored by the official local environment)",
        lambda: Script(root=[repl("counter.bump()", *answer("str(counter.bump())"))]),
        [{"prompt": CTX, "root_prompt": "Count twice."}],
        rlm={"environment_kwargs": {"isolated": False}},
        tools="object",
    ),
    Scenario(
        "custom_system_prompt",
        "custom_system_prompt with {custom_tools_section} and orchestrator=False: the system message is it",
        lambda: Script(root=[repl(*answer("str(lookup('gamma'))"))]),
        [{"prompt": CTX, "root_prompt": "Look up."}],
        rlm={
            "custom_system_prompt": "You are a scripted test model.{custom_tools_section}\nEnd of instructions.",
            "orchestrator": False,
        },
        tools="basic",
        keep_system=True,
    ),
    Scenario(
        "out_of_iterations",
        "no answer in max_iterations=2 turns: the runtime asks once more for a final answer",
        _loop(repl("print('still looking')")),
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
        "rlm_query_batched",
        "max_depth=2: rlm_query_batched starts a child RLM per prompt (concurrently), replies in order",
        lambda: Script(
            root=[
                repl("rs = rlm_query_batched(['CHILD-A: x', 'CHILD-B: yy'])", "print(rs)"),
                repl(*answer("'|'.join(rs)")),
            ],
            child=[repl(*answer("context[:7]"))],
            root_marker="ROOT-TASK",
        ),
        [{"prompt": CTX, "root_prompt": "ROOT-TASK: fan out."}],
        rlm={"max_depth": 2},
        callbacks=True,
        concurrent=True,
    ),
    Scenario(
        "child_out_of_iterations",
        "max_depth=2, max_iterations=2: a child RLM that never answers gets the final ask; its reply flows back",
        lambda: Script(
            root=[repl("r = rlm_query('CHILD-TASK: never done')", *answer("'root got: ' + r"))],
            child=[repl("print('child looking')")],
            root_marker="ROOT-TASK",
            final="child-final",
        ),
        [{"prompt": CTX, "root_prompt": "ROOT-TASK: delegate."}],
        rlm={"max_depth": 2, "max_iterations": 2},
    ),
    Scenario(
        "rlm_query_at_depth_cap",
        "max_depth=1 (the default): rlm_query is a plain call",
        lambda: Script(root=[repl("r = rlm_query('LEAF: ping')", *answer("r"))], sub="pong"),
        [{"prompt": CTX, "root_prompt": "Recurse?"}],
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
        "without_root_prompt",
        "completion(prompt) alone: the prompt is the context, no question",
        lambda: Script(root=[repl(*answer("context.split()[-1].strip('.')"))]),
        [{"prompt": "The secret is 42."}],
    ),
    Scenario(
        "with_root_prompt",
        "the same with root_prompt: the question goes into the first user message",
        lambda: Script(root=[repl(*answer("context.split()[-1].strip('.')"))]),
        [{"prompt": "The secret is 42.", "root_prompt": "What is the secret?"}],
    ),
    Scenario(
        "max_errors",
        "max_errors=2 and every block raises: ErrorThresholdExceededError after the second turn",
        _loop(repl("1 / 0", text="Try.")),
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
        _sub_call,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        logger="memory",
        callbacks=True,
    ),
    Scenario(
        "logger_dir",
        "RLMLogger(log_dir=...): the JSONL records' types and keys",
        _sub_call,
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
        "final_in_code",
        "FINAL(...) and FINAL_VAR(...) called in a repl block: names the official REPL does not have",
        lambda: Script(root=[repl("FINAL('x')"), repl("FINAL_VAR('y')"), repl(*answer("'from-answer'"))]),
        [{"prompt": CTX, "root_prompt": "Finish in code."}],
    ),
    Scenario(
        "answer_then_raise",
        "a block that sets the answer ready, then raises: the official takes the answer",
        lambda: Script(root=[repl(*answer("'kept'"), "1 / 0")]),
        [{"prompt": CTX, "root_prompt": "Answer, then fail."}],
    ),
    Scenario(
        "several_blocks",
        "two blocks a reply: `REPL output (block i):` feedback; then an answer in the first block and more code"
        " in the second, which the official still runs (the first block's answer is taken)",
        lambda: Script(
            root=[
                repl("print('a')") + "\n" + repl("print('b')"),
                repl(*answer("'first'")) + "\n" + repl("print('second ran')", "answer['content'] = 'second'"),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Two blocks."}],
        logger="memory",
    ),
    Scenario(
        "scaffold_restored",
        "model code rebinds context and llm_query: both are restored after the block",
        lambda: Script(
            root=[
                repl("context = 'gone'", "llm_query = None"),
                repl(*answer("context[:5] + ' ' + str(callable(llm_query))")),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Rebind the scaffold."}],
    ),
    Scenario(
        "show_vars",
        "SHOW_VARS() returns the official listing of the REPL's variables",
        lambda: Script(root=[repl("x = 1", "words = ['a']"), repl(*answer("SHOW_VARS()"))]),
        [{"prompt": CTX, "root_prompt": "List."}],
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
        "long_output",
        "a block printing 30,000 characters: the feedback cut at 20,000 as the official does",
        lambda: Script(root=[repl("print('x' * 30000)"), repl(*answer("'done'"))]),
        [{"prompt": CTX, "root_prompt": "Print a lot."}],
    ),
    Scenario(
        "timeout",
        "max_timeout=3 s and root turns that take 2 s: TimeoutExceededError before the third turn",
        lambda: Script(root=[repl("print('slow')", text="Turn.")], root_delay_s=2.0),
        [{"prompt": CTX, "root_prompt": "Take your time."}],
        rlm={"max_timeout": 3.0},
    ),
    Scenario(
        "token_limit",
        "max_tokens=250, 110 tokens a call: TokenLimitExceededError after the third turn (330 tokens)",
        _loop(repl("print('more')", text="Going on.")),
        [{"prompt": CTX, "root_prompt": "Spend."}],
        rlm={"max_tokens": 250},
    ),
    Scenario(
        "budget",
        "max_budget=0.025 and a provider-reported cost of 0.01 a call: BudgetExceededError after the third turn",
        lambda: Script(root=[repl("print('costly')")], cost=0.01),
        [{"prompt": CTX, "root_prompt": "Spend money."}],
        rlm={"max_budget": 0.025},
    ),
    Scenario(
        "interrupted",
        "Ctrl-C (SIGINT) while the second turn is awaited: CancellationError with the last reply as partial_answer",
        lambda: Script(
            root=[repl("print('working')", text="First turn."), repl(*answer("'late'"))], root_delay_s=0.0
        ),
        [{"prompt": CTX, "root_prompt": "Wait."}],
        interrupt_at_root=1,
    ),
    Scenario(
        "setup_code",
        "environment_kwargs={'setup_code': ...} runs in the REPL before the first turn",
        lambda: Script(root=[repl(*answer("str(seed * 2)"))]),
        [{"prompt": CTX, "root_prompt": "Double the seed."}],
        rlm={"environment_kwargs": {"setup_code": "seed = 21"}},
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
    Scenario(
        "compaction_tiny_threshold",
        "compaction=True at a tiny threshold: a summary request before every turn; `history` in the REPL",
        lambda: Script(
            root=[
                repl("print('step one')"),
                repl(*answer("type(history).__name__ + ':' + str(len(history))")),
            ]
        ),
        [{"prompt": CTX, "root_prompt": "Compact."}],
        rlm={"compaction": True, "compaction_threshold_pct": 0.001},
    ),
]

# the issue's list first, in its order; the scenarios added beside it after
ISSUE_27 = [
    "sub_call",
    "out_of_iterations",
    "custom_tools",
    "depth_2",
    "non_string_answer",
    "dict_context",
    "message_list_context",
    "with_root_prompt",
    "without_root_prompt",
    "max_errors",
    "error_then_recovery",
    "logger_memory",
    "logger_dir",
    "python_fence",
    "final_text",
    "answer_rebound",
    "timeout",
    "token_limit",
    "persistent",
    "compaction",
]
SCENARIOS.sort(key=lambda s: ISSUE_27.index(s.name) if s.name in ISSUE_27 else len(ISSUE_27))
BY_NAME = {s.name: s for s in SCENARIOS}
