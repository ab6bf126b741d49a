"""The names model-written code sees in its REPL, put together in one place.

The worker (`rlmx.sandbox.worker`) loads the context, speaks to the host and runs the cells;
`ReplNamespace` is what those cells run in: the context (`context`, and `ctx`, a free alias), the tools
over it (`peek`, `grep`, `partition`, `search`, `count_tokens`, `Match`), the host's four sub-calls
(the worker's own methods, passed in as they are), `history`, `SHOW_VARS`, `FINAL`, `FINAL_VAR` and the
`answer` dict. What a cell answered -- by `FINAL` / `FINAL_VAR`, or by setting `answer["ready"]` -- is
kept here too, for the worker to report after the cell; so are the reserved names, put back after every
cell if the code rebound them.

What differs between the prompt dialects (`rlmx`, the default, and `official`, the official RLM
runtime's) comes as a `ReplDialect` record of behaviours (`rlmx.repl.dialect`): e.g. whether `answer` is
reserved too, and whether the worker echoes a cell's trailing expression.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any, Protocol

from rlmx.repl import helpers, search, tokens
from rlmx.repl.dialect import RLMX, SEGMENT, ReplDialect
from rlmx.repl.textview import TextView

# The names the REPL provides and puts back after every cell (with `context_N` / `history_N` when
# present, and `answer` when the dialect reserves it). `ctx` is not one: models reuse that name freely.
RESERVED = frozenset(
    "context llm_query llm_query_batched vision_query rlm_query rlm_query_batched peek grep partition "
    "SHOW_VARS FINAL FINAL_VAR history count_tokens search Match".split()
)
NUMBERED = re.compile(r"(context|history)_\d+")

MODEL_NAME_CHARS = 100  # a second positional argument longer than this is text, not a model name


class HostCalls(Protocol):
    """The four requests a REPL may make of the host (the worker sends each one on its pipe; the host
    decides, through the run's ledger, whether the call is made)."""

    def llm_query(
        self, prompt: Any, model: str | None = None, images: Any = None, detail: Any = None
    ) -> str: ...

    def vision_query(
        self, prompt: Any, images: Any = None, model: str | None = None, detail: Any = None
    ) -> str: ...

    def llm_query_batched(
        self, prompts: Any, model: str | None = None, images: Any = None, detail: Any = None
    ) -> list[str]: ...

    def rlm_query(self, prompt: Any, model: str | None = None, context: Any = None) -> str: ...

    def rlm_query_batched(
        self, prompts: Any, model: str | None = None, contexts: Any = None
    ) -> list[str]: ...


def text_view(context: Any) -> TextView:
    """The context's text view with grep's line index built (built before a fork, it is shared)."""
    view = TextView(context if context is not None else "")
    view.build_line_index()
    return view


def check_model_name(method: str, model: Any) -> str | None:
    """`model` as a sub-call sends it. The official signatures take the model second
    (`rlm_query(prompt, model=None, context=None)`): text passed there by older code is refused loudly
    rather than taken for a model name."""
    if model is None or (
        isinstance(model, str) and len(model) <= MODEL_NAME_CHARS and not any(c.isspace() for c in model)
    ):
        return model
    plural = "s" if method.endswith("_batched") else ""
    raise TypeError(
        f"{method}: the second argument is a model name and this does not look like one; "
        f"pass the text as context{plural}=... ({method}(prompt{plural}, context{plural}=...))"
    )


class VarsListing(str):
    """What SHOW_VARS returns: a string that shows as itself when a cell's last line echoes it."""

    def __repr__(self) -> str:
        return str(self)


class ReplNamespace:
    """The globals a REPL's cells run in (`names`), the answer a cell gave (`final`), and the objects
    the reserved names must keep (`reserved`)."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        # set by FINAL / FINAL_VAR: {"kind": "final" | "final_var", "text" | "json": ...}
        self.final: dict[str, Any] | None = None
        self.dialect = RLMX
        self.answer: dict[str, Any] = {"content": "", "ready": False}  # the REPL's own `answer` dict
        self.reserved: dict[str, Any] = {}  # reserved name -> the object it must keep
        self.mirror: list[dict[str, Any]] = []  # the list the host's messages are appended to
        self.cache_dir: str | None = None
        self.note: Callable[[str], None] = print_note  # one `[rlmx] ...` line in the cell's output
        self.noticed: set[str] = set()  # the helpers whose cut was noted in this cell (once each)
        self.tool_names: list[str] = []  # the user's tools, in their order

    def fill(
        self,
        context: Any,
        view: TextView,
        *,
        history: list[dict[str, Any]],
        host: HostCalls,
        cache_dir: str | None = None,
        dialect: ReplDialect = RLMX,
        tools: dict[str, Any] | None = None,
        session: bool = False,
        note: Callable[[str], None] | None = None,
    ) -> None:
        """Give the cells their names. `view` is `context`'s text view; `cache_dir` is where `search` may
        keep its index (None: in memory); `dialect` is what the prompt dialect changes here; `tools` are the user's
        (stubs of host functions and copies of values), reserved like the REPL's own names; `session`:
        the REPL of a session, whose later values the host adds with `put`; `note` writes one line of
        rlmx's own into the running cell's output (the helpers' notices: a default cap cut a result)."""
        self.dialect = dialect
        if note is not None:
            self.note = note
        self.cache_dir = cache_dir
        self.mirror = history
        bound = self._context_names(context, view)
        self.names.update(
            __name__="__main__",
            context=context,
            ctx=context,
            history=history,
            answer=self.answer,
            llm_query=host.llm_query,
            llm_query_batched=host.llm_query_batched,
            vision_query=host.vision_query,
            rlm_query=host.rlm_query,
            rlm_query_batched=host.rlm_query_batched,
            peek=bound["peek"],
            grep=bound["grep"],
            partition=bound["partition"],
            count_tokens=tokens.count_tokens,
            search=bound["search"],
            Match=helpers.Match,
            SHOW_VARS=self.SHOW_VARS,
        )
        if dialect.final_functions:
            self.names.update(FINAL=self.FINAL, FINAL_VAR=self.FINAL_VAR)
        if session or dialect.official_names:  # a session's REPL: its first context is also `context_0`
            self.names["context_0"] = context
        self.tool_names = list(tools or {})
        self.names.update(tools or {})
        self.reserved = {
            name: value
            for name, value in self.names.items()
            if name in RESERVED or NUMBERED.fullmatch(name) or name in (tools or {})
        }
        if dialect.answer_reserved:
            self.reserved["answer"] = self.answer

    def bind_context(self, context: Any, view: TextView) -> None:
        """Make `context` (and `ctx`) this value, with the helpers that read it."""
        bound = self._context_names(context, view)
        self.names.update(bound, ctx=context)
        self.reserved.update(bound)  # the names keep the new objects from now on

    def _context_names(self, context: Any, view: TextView) -> dict[str, Any]:
        """`context` and the helpers that read it: `peek`, `grep`, `partition`, `search`."""
        index = search.SearchIndex(view, cache_dir=self.cache_dir)
        return {
            "context": context,
            "peek": self._peek(view),
            "grep": self._grep(view),
            "partition": lambda n=None, **kw: helpers.partition(
                context, view, n, count=tokens.count_batch, **kw
            ),
            "search": index.search,
        }

    def _peek(self, view: TextView) -> Callable[..., str]:
        def peek(start: int = 0, length: int | None = None) -> str:
            text = helpers.peek(view, start, helpers.DEFAULT_PEEK_CHARS if length is None else length)
            if length is None:  # the default cut it: say so, and how to see more
                self._cut_notice("peek", helpers.peek_notice(view, start, text))
            return text

        return peek

    def _grep(self, view: TextView) -> Callable[..., helpers.GrepResult]:
        def grep(pattern: Any, **kw: Any) -> helpers.GrepResult:
            result = helpers.grep(view, pattern, **kw)
            if result.truncated and "max_matches" not in kw:  # a cap the caller did not choose
                self._cut_notice("grep", result.notice(helpers.DEFAULT_MAX_MATCHES))
            return result

        return grep

    def _cut_notice(self, helper: str, text: str | None) -> None:
        """Note that a default cut a helper's result: the first time in a cell only (a loop of greps
        gets one line, not one per call)."""
        if text and helper not in self.noticed:
            self.noticed.add(helper)
            self.note(text)

    def start_cell(self) -> None:
        """Before a cell: no answer yet, and no notice given."""
        self.final = None
        self.noticed.clear()

    def put(self, name: str, value: Any) -> None:
        """A value the host puts into a live REPL (a session): `context_N` (`context_0` also becomes
        `context`), `history_N` (`history_0` is also `history` when the dialect says so), or
        `history`: the list this question's messages are mirrored into from now on. Each is reserved:
        put back after every cell if the code rebinds it."""
        if name == "history":
            if not isinstance(value, list):
                raise TypeError("history must be a list of messages")
            self.mirror = value
            if not (self.dialect.history_is_first and "history_0" in self.reserved):
                self._reserve("history", value)
            return
        if NUMBERED.fullmatch(name) is None:
            raise ValueError(f"the host cannot put {name!r}: only context_N, history_N and history")
        self._reserve(name, value)
        if name == "context_0":
            self.bind_context(value, text_view(value))
        elif name == "history_0" and self.dialect.history_is_first:
            self._reserve("history", value)

    def _reserve(self, name: str, value: Any) -> None:
        self.names[name] = self.reserved[name] = value

    # --- what a cell may call ------------------------------------------------------------------
    def FINAL(self, value: Any) -> None:
        self.final = {"kind": "final", "text": value if isinstance(value, str) else str(value)}

    def FINAL_VAR(self, name: Any) -> None:
        """`FINAL_VAR("name")` answers with variable `name`; `FINAL_VAR(value)` with the value itself
        when it is not a string, or when it is a string some variable holds (`FINAL_VAR(answer)`). A
        string that is neither (a misspelt name) raises: it never becomes the answer."""
        if isinstance(name, str) and name in self.names:
            value = self.names[name]
        elif isinstance(name, str) and not self._held(name):
            raise NameError(f"FINAL_VAR: no variable named {name!r}; assign it first")
        else:
            value = name
        self.final = {"kind": "final_var", **encode_value(value)}

    def _held(self, value: Any) -> bool:
        """Whether a variable of the REPL holds this very object."""
        return any(v is value for k, v in self.names.items() if not k.startswith("__"))

    def SHOW_VARS(self) -> str:
        """The variables the cells made, one `name: type [len=N]` per line (returned, not printed); under
        the official names, `Available variables: {name: type, ...}` as the official REPL shows them."""
        if self.dialect.official_names:
            return VarsListing(self._official_listing())
        rows = []
        for key, value in self.names.items():
            if key.startswith("_") or self._provided(key, value) or type(value).__name__ == "module":
                continue
            size = f" len={len(value)}" if hasattr(value, "__len__") else ""
            kind = "str" if isinstance(value, VarsListing) else type(value).__name__
            rows.append(f"{key}: {kind}{size}")
        return VarsListing("\n".join(rows) if rows else "(no variables yet)")

    def variable_names(self) -> list[str]:
        """The names of the variables the cells made that hold plain values (text, numbers, lists,
        dicts, tuples): the `REPL variables: [...]` line of the official dialect's feedback."""
        plain = (str, int, float, bool, list, dict, tuple)
        if self.dialect.official_names:
            return self._official_names(plain)
        return [
            key
            for key, value in self.names.items()
            if not key.startswith("_") and not self._provided(key, value) and isinstance(value, plain)
        ]

    def _official_listing(self) -> str:
        """Every name but the REPL's functions and `answer`, with its type's name, in the official order."""
        history = ["history"] if self.dialect.lists_history else []
        values = [name for name in self.tool_names if not callable(self.names.get(name))]
        shown: dict[str, str] = {}
        for key in [*values, *history, "context_0", "context"]:
            if key in self.names:
                shown[key] = type(self.names[key]).__name__
        for key, value in self.names.items():
            if key in shown or key.startswith("_") or key in ("ctx", "answer", "history"):
                continue
            if self._provided(key, value) and not NUMBERED.fullmatch(key):
                continue
            shown[key] = type(value).__name__
            if key == "history_0" and not history and "history" in self.names:
                shown["history"] = type(self.names["history"]).__name__
        return f"Available variables: {shown}" if shown else "No variables yet."

    def _official_names(self, plain: tuple[type, ...]) -> list[str]:
        """As the official REPL lists them: `answer`, the user's plain values (then `history` under
        compaction), `context_0`, `context`, then every other plain value in the order it came, with
        `history` after `history_0` in a session."""
        history = ["history"] if self.dialect.lists_history else []
        first = ["answer", *self.tool_names, *history, "context_0", "context"]
        names = self.names
        listed = [key for key in first if isinstance(names.get(key), plain)]
        for key, value in names.items():
            if (
                key in listed
                or key.startswith("_")
                or key in ("ctx", "history")
                or not isinstance(value, plain)
            ):
                continue
            listed.append(key)
            if key == "history_0" and not history and isinstance(names.get("history"), plain):
                listed.append("history")
        return listed

    def _provided(self, key: str, value: Any) -> bool:
        """A name the REPL gave that still holds what it was given (`ctx` and `answer` included)."""
        if key in self.reserved:
            return True
        given = {"ctx": self.reserved.get("context"), "answer": self.answer}
        return key in given and value is given[key]

    # --- after a cell --------------------------------------------------------------------------
    def take_answer(self) -> dict[str, Any] | None:
        """The answer a cell gave through the `answer` dict: {"kind": "answer_dict", "text" | "json": ...}
        when `answer` is a dict whose "ready" is true (the REPL's own dict or one the code bound to the
        name), else None. Its "ready" goes back to False, so an answer the host turns down does not end
        the next cell again. When the dialect reserves `answer`, a dict with a "ready" key bound to it
        becomes the contents of the REPL's own dict (the name itself is put back by restore_reserved)."""
        current = self.names.get("answer")
        if not isinstance(current, dict) or "ready" not in current:
            return None
        if self.dialect.answer_reserved and current is not self.answer:
            self.answer.clear()
            self.answer.update(current)
            self.names["answer"] = current = self.answer
        if not current["ready"]:
            return None
        current["ready"] = False
        return {"kind": "answer_dict", **encode_value(current.get("content", ""))}

    def restore_reserved(self) -> list[str]:
        """Put back every reserved name the code rebound or deleted, as the very object it held (a large
        context is never copied); returns the names put back."""
        restored = []
        for name, value in self.reserved.items():
            if name not in self.names or self.names[name] is not value:
                self.names[name] = value
                restored.append(name)
        return restored

    def extend_history(self, messages: list[dict[str, Any]]) -> None:
        """Messages of the run the host appends to `history` (this question's) before a cell; an entry
        `{SEGMENT: [...]}` is that list (a turn's messages, the strict official dialect's entry)."""
        self.mirror.extend(m[SEGMENT] if set(m) == {SEGMENT} else m for m in messages)


def print_note(text: str) -> None:
    """A note written to the cell's stdout (the worker passes its own `note`, which writes the same line)."""
    sys.stdout.write("[rlmx] " + " ".join(text.splitlines()) + "\n")


def restored_note(names: list[str]) -> str:
    """What a cell's output is told (after "[rlmx] ") when reserved names were put back."""
    quoted = ", ".join(repr(n) for n in names)
    if len(names) == 1:
        return f"{quoted} is reserved and was restored; use another name"
    return f"{quoted} are reserved and were restored; use other names"


def encode_value(value: Any) -> dict[str, Any]:
    """A value as the host receives it (FINAL_VAR, get_var): its JSON form when it has one, else its text."""
    if isinstance(value, str):
        return {"text": value}
    try:
        return {"json": json.loads(json.dumps(value, allow_nan=False))}
    except (TypeError, ValueError):
        return {"text": str(value)}
