"""Progress on stderr, from the run's event stream: a live tree on a terminal, plain lines elsewhere.

    with progress_sink(sys.stderr) as sink:          # LiveTree on a TTY, PlainLines otherwise
        RLM(..., on_event=sink).run(question, context)

Both are `Emitter` sinks fed by the same records the trace gets; `ProgressState` folds the records
into what the display needs (the RLMs, their turns, the code running now, batches, totals).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from rlmx.engine.dialect import dialect_named
from rlmx.engine.parse import RUNNABLE, parse_reply
from rlmx.engine.profiles import error_line
from rlmx.outcomes import SUB_CALL_PURPOSES
from rlmx.trace.events import (
    BatchEnd,
    BatchStart,
    ChildEnd,
    ChildStart,
    Error,
    Event,
    Exec,
    ExecStart,
    Limit,
    LMCall,
    LMRetry,
    RunEnd,
    RunStart,
    SandboxReady,
)
from rlmx.trace.events import Final as FinalRecord
from rlmx.usage import cost_text

MAX_CHILDREN_SHOWN = 4  # running children drawn per RLM; the rest become a "… more" line
LINE_CHARS = 72


def first_line(value: Any, limit: int = LINE_CHARS) -> str:
    text = (value.get("text") or value.get("head") or "") if isinstance(value, dict) else str(value or "")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def last_line(value: Any, limit: int = LINE_CHARS) -> str:
    """The last non-blank line: for a traceback, the exception itself (`ValueError: bad`)."""
    text = (value.get("text") or value.get("tail") or "") if isinstance(value, dict) else str(value or "")
    line = error_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


NO_CODE = "no code block; the reply was not run"


def runnable_of(profile: str) -> frozenset[str]:
    """The fence labels whose blocks a run of this prompt profile runs (a template file's: the default)."""
    try:
        return dialect_named(profile).runnable
    except ValueError:
        return frozenset(RUNNABLE)


def had_no_code(r: LMCall, runnable: frozenset[str]) -> bool:
    """A root-model reply with no code block to run and no FINAL line: the turn ran nothing. Only said
    when the trace holds the whole reply (a capped excerpt may have cut a block out)."""
    reply = r.reply
    if (
        r.error
        or r.purpose not in ("root", "child_root")
        or not isinstance(reply, dict)
        or "text" not in reply
    ):
        return False
    parsed = parse_reply(str(reply["text"]), runnable)
    return not parsed.code_blocks and parsed.final is None


@dataclass
class BatchState:
    method: str
    n: int
    done: int = 0
    errors: int = 0
    finished: bool = False


@dataclass
class NodeState:
    id: str
    depth: int
    question: str
    model: str
    turn: int = 0
    doing: str = "starting"
    sub_calls: int = 0
    children: list[str] = field(default_factory=list)
    batches: list[str] = field(default_factory=list)
    stopped_by: str | None = None
    batch_id: str | None = None  # the rlm_query_batched request this child belongs to


@dataclass
class ProgressState:
    """What a progress display shows, folded from trace records."""

    started: float = field(default_factory=time.monotonic)
    nodes: dict[str, NodeState] = field(default_factory=dict)
    owner_of_exec: dict[str, str] = field(default_factory=dict)
    batches: dict[str, BatchState] = field(default_factory=dict)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    warnings: list[str] = field(default_factory=list)
    root_id: str | None = None
    stopped_by: str | None = None
    runnable: frozenset[str] = frozenset(RUNNABLE)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def owner(self, parent_id: Any) -> NodeState | None:
        node_id = self.owner_of_exec.get(str(parent_id), str(parent_id))
        return self.nodes.get(node_id)

    def apply(self, event: Event) -> None:
        handler = HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def on_run_start(self, r: RunStart) -> None:
        self.root_id = r.id
        self.runnable = runnable_of(r.prompt_profile)
        self.nodes[r.id] = NodeState(r.id, 0, first_line(r.question), r.model)
        self.warnings.extend(r.warnings)
        if r.model in r.unpriced_models:  # no price for the root model: never a cost shown as $0
            self.cost_usd = None

    def on_child_start(self, r: ChildStart) -> None:
        node = NodeState(r.id, r.depth, first_line(r.question, 50), r.model)
        node.batch_id = r.batch_id
        self.nodes[r.id] = node
        parent = self.owner(r.parent_id)
        if parent is not None:
            parent.children.append(r.id)

    def on_lm_call(self, r: LMCall) -> None:
        if r.counted:
            self.calls += 1
            self.input_tokens += r.input_tokens
            self.output_tokens += r.output_tokens
            cost = r.cost_usd
            self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost
        batch = self.batches.get(str(r.batch_id))
        if batch is not None:
            batch.done += 1
            batch.errors += 1 if r.error else 0
        node = self.owner(r.parent_id)
        if node is None:
            return
        if r.purpose in SUB_CALL_PURPOSES:
            node.sub_calls += 1
        else:
            node.turn = r.iteration or node.turn
            node.doing = "model replied" if not r.error else "model call failed"
            if had_no_code(r, self.runnable):
                node.doing = f"model replied: {NO_CODE}"

    def on_exec_start(self, r: ExecStart) -> None:
        self.owner_of_exec[r.exec_id] = str(r.parent_id)
        node = self.nodes.get(str(r.parent_id))
        if node is not None:
            node.turn = r.iteration or node.turn
            node.doing = f"running code: {first_line(r.code, 56)}"

    def on_exec(self, r: Exec) -> None:
        node = self.nodes.get(str(r.parent_id))
        if node is not None:
            failed = f"code failed ({last_line(r.error, 40)}), asking the model"
            node.doing = failed if r.error else "waiting for the model"

    def on_lm_retry(self, r: LMRetry) -> None:
        node = self.owner(r.parent_id)
        if node is not None and r.purpose not in SUB_CALL_PURPOSES:
            node.doing = f"retrying the model (attempt {r.attempt + 1}): {r.error}"

    def on_batch_start(self, r: BatchStart) -> None:
        self.batches[r.id] = BatchState(r.method, r.n)
        node = self.owner(r.parent_id)
        if node is not None:
            node.batches.append(r.id)

    def on_batch_end(self, r: BatchEnd) -> None:
        batch = self.batches.get(r.batch_id)
        if batch is not None:
            batch.finished = True
            batch.errors = r.errors or batch.errors

    def on_child_end(self, r: ChildEnd) -> None:
        node = self.nodes.get(r.child_id)
        if node is not None:
            node.stopped_by = r.stopped_by
            batch = self.batches.get(str(node.batch_id))
            if batch is not None:
                batch.done += 1
                batch.errors += 0 if r.stopped_by == "final" else 1

    def on_final(self, r: FinalRecord) -> None:
        node = self.nodes.get(str(r.parent_id))
        if node is not None:
            node.doing = f"done: {r.stopped_by}"

    def on_limit(self, r: Limit) -> None:
        node = self.nodes.get(str(r.parent_id))
        if node is not None:
            node.doing = f"limit {r.reason}: asking for a final answer"

    def on_run_end(self, r: RunEnd) -> None:
        self.stopped_by = r.stopped_by

    def header(self) -> str:
        cost = cost_text(self.cost_usd)
        return (
            f"{self.elapsed():6.1f}s | {self.calls} calls | {self.input_tokens:,} in / "
            f"{self.output_tokens:,} out tokens | {cost}"
        )


HANDLERS: dict[type[Event], Callable[[ProgressState, Any], None]] = {
    RunStart: ProgressState.on_run_start,
    ChildStart: ProgressState.on_child_start,
    LMCall: ProgressState.on_lm_call,
    LMRetry: ProgressState.on_lm_retry,
    ExecStart: ProgressState.on_exec_start,
    Exec: ProgressState.on_exec,
    BatchStart: ProgressState.on_batch_start,
    BatchEnd: ProgressState.on_batch_end,
    ChildEnd: ProgressState.on_child_end,
    FinalRecord: ProgressState.on_final,
    Limit: ProgressState.on_limit,
    RunEnd: ProgressState.on_run_end,
}


class PlainLines:
    """One line per notable event (not per sub-call), for logs and pipes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.state = ProgressState()
        self.said_turn: dict[str, int | None] = {}  # node id -> the turn its lines last named

    def turn(self, where: str, node: NodeState | None, iteration: int | None) -> str:
        """`root turn 6` on a turn's first line, `root` on the next ones: the turn is said once."""
        key = node.id if node is not None else ""
        if key in self.said_turn and self.said_turn[key] == iteration:
            return where
        self.said_turn[key] = iteration
        return f"{where} turn {iteration or '-'}"

    def __call__(self, event: Event) -> None:
        self.state.apply(event)
        text = self.describe(event)
        if text:
            pad = "  " * event.depth
            self.stream.write(f"[rlmx {self.state.header()}] {pad}{text}\n")
            self.stream.flush()

    def describe(self, r: Event) -> str | None:
        node = self.state.owner(r.parent_id)
        where = "root" if node is None or node.depth == 0 else f"child {node.question[:30]!r}"
        if isinstance(r, RunStart):
            return "; ".join(["started", *(f"warning: {w}" for w in r.warnings)])
        if isinstance(r, LMCall) and not r.is_sub_call:
            tokens = f"{r.input_tokens:,} in / {r.output_tokens:,} out"
            tries = f" after {r.attempts} attempts" if r.attempts > 1 else ""
            # the error itself is said once, where the run reports how it ended
            status = f"model call failed{tries}" if r.error else f"model replied ({tokens})"
            no_code = f" — {NO_CODE}" if had_no_code(r, self.state.runnable) else ""
            return f"{self.turn(where, node, r.iteration)}: {status} [{r.purpose}]{no_code}"
        if isinstance(r, LMRetry):
            return (
                f"{where}: {r.model} attempt {r.attempt} failed: {first_line(r.error, 120)}"
                f"; retrying in {r.delay_s:.1f} s"
            )
        if isinstance(r, ExecStart):
            return f"{self.turn(where, node, r.iteration)}: running code: {first_line(r.code)}"
        if isinstance(r, Exec) and r.error:
            return f"{where}: code failed: {last_line(r.error, 120)}"
        if isinstance(r, BatchStart):
            return f"{where}: {r.method} with {r.n} prompts"
        if isinstance(r, BatchEnd):
            errors = f", {r.errors} errors" if r.errors else ""
            return f"{where}: {r.method} done ({r.n} prompts{errors})"
        if isinstance(r, ChildStart):
            return f"child RLM started: {first_line(r.question, 60)!r}"
        if isinstance(r, ChildEnd):
            return f"child RLM ended by {r.stopped_by} after {r.iterations} turns"
        if isinstance(r, FinalRecord):
            return f"{where}: finished ({r.stopped_by})"
        if isinstance(r, Limit):
            return f"{where}: limit: {r.reason}"
        if isinstance(r, Error):
            if r.depth == 0 and not r.recoverable:
                return None  # how the run ended: said once by the caller (the CLI's last line)
            return f"{where}: error: {first_line(r.message)}"
        return None

    def close(self) -> None:
        """Nothing to tear down: every line is already written."""


class LiveTree:
    """A compact live tree on a terminal (rich): root turns, the code running now, children with their
    own turns, batches as a counter with a bar; tokens, cost and elapsed time on top."""

    def __init__(
        self, stream: IO[str] | None = None, *, console: Any = None, refresh_per_second: float = 4
    ) -> None:
        from rich.console import Console

        self.console = console or Console(file=stream, highlight=False, soft_wrap=False)
        self.state = ProgressState()
        self.lock = threading.Lock()
        self.refresh_per_second = refresh_per_second
        self.live: Any = None
        self.closed = False

    def start(self) -> LiveTree:
        """Draw from now on (called on the first record, so a run refused at start draws nothing)."""
        from rich.live import Live

        self.live = Live(
            console=self.console,
            get_renderable=self.render,
            refresh_per_second=self.refresh_per_second,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.live.start()
        return self

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.state.apply(event)
        if self.live is None and not self.closed:
            self.start()

    def close(self) -> None:
        self.closed = True
        if self.live is not None:
            self.live.stop()  # draws the last state once more and leaves it on screen
            self.live = None

    def render(self) -> Any:
        from rich.console import Group
        from rich.text import Text
        from rich.tree import Tree

        with self.lock:
            state = self.state
            parts: list[Any] = [Text(f"rlmx {state.header()}", style="bold")]
            parts += [Text(f"warning: {w}", style="yellow") for w in state.warnings]
            root = state.nodes.get(state.root_id or "")
            if root is not None:
                tree = Tree(self.label(root))
                self.grow(tree, root)
                parts.append(tree)
            return Group(*parts)

    def label(self, node: NodeState) -> Any:
        from rich.text import Text

        name = "root" if node.depth == 0 else f"child {node.question!r}"
        if node.stopped_by is not None:
            return Text(f"✓ {name}: {node.stopped_by} after {node.turn} turns", style="dim")
        text = Text(f"{name} ", style="bold" if node.depth == 0 else "")
        text.append(f"turn {node.turn or 1}", style="cyan")
        text.append(f" · {node.doing}")
        if node.sub_calls:
            text.append(f" · {node.sub_calls} sub-calls", style="dim")
        text.no_wrap, text.overflow = True, "ellipsis"
        return text

    def grow(self, tree: Any, node: NodeState) -> None:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        for batch_id in node.batches:
            batch = self.state.batches[batch_id]
            if batch.finished:
                continue
            row = Table.grid(padding=(0, 1))
            errors = f" ({batch.errors} errors)" if batch.errors else ""
            row.add_row(
                f"{batch.method} {batch.done}/{batch.n}{errors}", ProgressBar(batch.n, batch.done, width=24)
            )
            tree.add(row)
        children = [self.state.nodes[c] for c in node.children]
        running = [c for c in children if c.stopped_by is None]
        for child in running[:MAX_CHILDREN_SHOWN]:
            self.grow(tree.add(self.label(child)), child)
        done = len(children) - len(running)
        hidden = len(running) - MAX_CHILDREN_SHOWN
        if hidden > 0 or done:
            more = [f"{hidden} more running"] if hidden > 0 else []
            tree.add(", ".join([*more, f"{done} children done"] if done else more), style="dim")


class Quiet:
    """No progress; only the run's start-up warnings (e.g. a budget that cannot cover a model)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStart):
            for warning in event.warnings:
                self.stream.write(f"rlmx: warning: {warning}\n")

    def close(self) -> None:
        """Nothing to close."""


_LAYERS_SAID: set[str] = set()  # the isolation layers this process has named on stderr


def layer_notice(event: SandboxReady) -> str | None:
    """The line saying where model code runs, once per process per layer, when it is not the
    namespace layer (which needs no word): the Landlock layer, and why the namespaces were not used."""
    if event.layer in ("namespaces", "none", "local", "") or event.layer in _LAYERS_SAID:
        return None
    _LAYERS_SAID.add(event.layer)
    why = event.unavailable.get("namespaces")
    ids = "a uid per worker" if event.worker_ids == "per-worker" else "your uid, signals scoped"
    text = f"rlmx: model code runs isolated by Landlock (ABI {event.landlock_abi}) + seccomp, {ids}"
    return text + (f"; {why}" if why else "") + " (docs/security.md)"


class WithLayerNotice:
    """A display that also says, once, where model code runs (`layer_notice`), quiet or not."""

    def __init__(self, display: LiveTree | PlainLines | Quiet, stream: IO[str]) -> None:
        self.display = display
        self.stream = stream

    def __call__(self, event: Event) -> None:
        if isinstance(event, SandboxReady):
            line = layer_notice(event)
            if line:
                self.stream.write(line + "\n")
                self.stream.flush()
        self.display(event)

    def close(self) -> None:
        self.display.close()


@contextmanager
def progress_sink(stream: IO[str], *, quiet: bool = False, live: bool | None = None) -> Iterator[Any]:
    """The progress display for `stream`: nothing when quiet, a live tree on a TTY, plain lines otherwise;
    either way, where model code runs when that is worth a line (`layer_notice`)."""
    if quiet:
        yield WithLayerNotice(Quiet(stream), stream)
        return
    if live is None:
        live = bool(getattr(stream, "isatty", lambda: False)())
    display: LiveTree | PlainLines = LiveTree(stream) if live else PlainLines(stream)
    try:
        yield WithLayerNotice(display, stream)
    finally:
        display.close()
