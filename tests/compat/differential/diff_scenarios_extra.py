"""Scenarios beside the issue's list: more of the official API (batches, other backends, sampling
arguments, tools, system prompts, recursion) and more of its runtime's edges."""

from __future__ import annotations

from diff_kit import CTX, Scenario, answer, repl, sub_call_script
from diff_policies import Script

EXTRA: list[Scenario] = [
    Scenario(
        "none_answer",
        "answer['ready'] = True with content None: the response is 'None'",
        lambda: Script(root=[repl(*answer("None"))]),
        [{"prompt": CTX, "root_prompt": "Nothing."}],
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
        sub_call_script,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        rlm={
            "other_backends": ["openai"],
            "other_backend_kwargs": [{"model_name": "scripted-sub", "api_key": "x"}],
        },
    ),
    Scenario(
        "sampling_args",
        "sampling_args for the root model, sub_sampling_args for sub-calls: in each request's body",
        sub_call_script,
        [{"prompt": CTX, "root_prompt": "What is 2+2?"}],
        rlm={"sampling_args": {"temperature": 0.25, "max_tokens": 300}, "sub_sampling_args": {"top_p": 0.5}},
    ),
    Scenario(
        "sampling_args_any_key",
        "a sampling argument outside the common ones (seed) goes into the request body as it is",
        sub_call_script,
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
        "long_output",
        "a block printing 30,000 characters: the feedback cut at 20,000 as the official does",
        lambda: Script(root=[repl("print('x' * 30000)"), repl(*answer("'done'"))]),
        [{"prompt": CTX, "root_prompt": "Print a lot."}],
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
