"""The names model-written code sees in its REPL, put together in one place.

The worker (`rlmx.sandbox.worker`) loads the context, speaks to the host and runs the cells;
`ReplNamespace` is what those cells run in: the context (`context`, `ctx`), the tools over it (`peek`,
`grep`, `partition`, `search`, `count_tokens`, `Match`), the host's four sub-calls (the worker's own
methods, passed in as they are), `history`, and `SHOW_VARS`, `FINAL`, `FINAL_VAR`. What `FINAL` and
`FINAL_VAR` set is kept here too, for the worker to report after the cell.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from rlmx.repl import helpers, search, tokens
from rlmx.repl.textview import TextView

# Names the REPL provides; `SHOW_VARS` lists every other name a cell made.
RESERVED = frozenset(
    "context ctx llm_query llm_query_batched rlm_query rlm_query_batched peek grep partition "
    "SHOW_VARS FINAL FINAL_VAR history count_tokens search Match".split()
)


class HostCalls(Protocol):
    """The four requests a REPL may make of the host (the worker sends each one on its pipe; the host
    decides, through the run's ledger, whether the call is made)."""

    def llm_query(self, prompt: Any, model: str | None = None) -> str: ...

    def llm_query_batched(self, prompts: Any, model: str | None = None) -> list[str]: ...

    def rlm_query(self, prompt: Any, context: Any = None) -> str: ...

    def rlm_query_batched(self, prompts: Any, contexts: Any = None) -> list[str]: ...


def text_view(context: Any) -> TextView:
    """The context's text view with grep's line index built (built before a fork, it is shared)."""
    view = TextView(context if context is not None else "")
    view.build_line_index()
    return view


class ReplNamespace:
    """The globals a REPL's cells run in (`names`), and the answer a cell gave (`final`)."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        # set by FINAL / FINAL_VAR: {"kind": "final" | "final_var", "text" | "json": ...}
        self.final: dict[str, Any] | None = None

    def fill(
        self,
        context: Any,
        view: TextView,
        *,
        history: list[dict[str, Any]],
        host: HostCalls,
        cache_dir: str | None = None,
    ) -> None:
        """Give the cells their names. `view` is `context`'s text view; `cache_dir` is where `search` may
        keep its index (None: in memory)."""
        index = search.SearchIndex(view, cache_dir=cache_dir)
        self.names.update(
            __name__="__main__",
            context=context,
            ctx=context,
            history=history,
            llm_query=host.llm_query,
            llm_query_batched=host.llm_query_batched,
            rlm_query=host.rlm_query,
            rlm_query_batched=host.rlm_query_batched,
            peek=lambda start=0, length=2000: helpers.peek(view, start, length),
            grep=lambda pattern, **kw: helpers.grep(view, pattern, **kw),
            partition=lambda n=None, **kw: helpers.partition(
                context, view, n, count=tokens.count_batch, **kw
            ),
            count_tokens=tokens.count_tokens,
            search=index.search,
            Match=helpers.Match,
            SHOW_VARS=self.SHOW_VARS,
            FINAL=self.FINAL,
            FINAL_VAR=self.FINAL_VAR,
        )

    def FINAL(self, value: Any) -> None:
        self.final = {"kind": "final", "text": value if isinstance(value, str) else str(value)}

    def FINAL_VAR(self, name: Any) -> None:
        value = self.names[name] if isinstance(name, str) and name in self.names else name
        self.final = {"kind": "final_var", **encode_value(value)}

    def SHOW_VARS(self) -> None:
        rows = []
        for key, value in self.names.items():
            if key.startswith("_") or key in RESERVED or type(value).__name__ == "module":
                continue
            size = f" len={len(value)}" if hasattr(value, "__len__") else ""
            rows.append(f"{key}: {type(value).__name__}{size}")
        print("\n".join(rows) if rows else "(no variables yet)")


def encode_value(value: Any) -> dict[str, Any]:
    """A value as the host receives it (FINAL_VAR, get_var): its JSON form when it has one, else its text."""
    if isinstance(value, str):
        return {"text": value}
    try:
        return {"json": json.loads(json.dumps(value, allow_nan=False))}
    except (TypeError, ValueError):
        return {"text": str(value)}
