"""The frames between the host and a REPL worker, and between the host and the run's zygote: each one a
frozen dataclass with explicit fields, defined once here for both ends (standard library only: the
worker and the zygote import it at start-up).

`encode` makes a frame's bytes (framed as `rlmx.sandbox.wire` says); `decode` makes a received message
back into a frame and refuses, with `ProtocolError`, anything else: an unknown type, a type the sender
may not send in that direction (`WORKER_TO_HOST`, ...), a missing or unknown field, a field of the wrong
type, an attachment the frame may not carry. The host treats every frame from a worker as hostile.

Binary attachments: a frame may carry named binary parts beside its JSON, as the frame's blob. The JSON
lists them, in the order their bytes follow, as `"attachments": [[name, size], ...]` (absent: none); the
sizes add up to the header's blob length. Each frame type names the attachments it may carry
(`ATTACHMENTS`): the context (`context` in INIT and SETUP, `value` in PUT) and, from a worker, only the
images a cell made (`image0`... in RPC).

Notes to the model (a model name this run does not have, ...) never cross the wire: the host collects
them while it answers a cell's requests and adds them to the cell's output itself (see
`rlmx.engine.subcalls`), so no value a tool or a sub-call returns is ever read as anything but a value.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

from rlmx.repl.dialect import RLMX, ReplDialect
from rlmx.repl.image_refs import ATTACHMENT_NAMES
from rlmx.sandbox import wire


class ProtocolError(ValueError):
    """A frame that is not what the protocol allows; whoever receives it ends the exchange."""


# --- records inside frames -----------------------------------------------------------------------------


class Record:
    """The base of every record here: equality and repr by fields, written once rather than generated
    per class (the dataclasses are declared with eq=False, repr=False: at the worker's start-up, each
    generated method costs an `exec`). Records are not changed once made."""

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and _plain_fields(self) == _plain_fields(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_plain_fields(self)!r})"


@dataclass(eq=False, repr=False)
class ReplOptions(Record):
    """What the engine decides about a REPL: its dialect, the user's tools (specs of host functions and
    plain values, see rlmx.repl.tools), and whether it is a session's (which later gets `put` values).
    `bare`: a REPL with none of rlmx's names, whose caller owns the namespace (DSPy's interpreter:
    tools and SUBMIT come with DEFINE, values with ASSIGN; see rlmx.sandbox.bare)."""

    dialect: ReplDialect = RLMX
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_values: dict[str, Any] = field(default_factory=dict)
    tool_max_bytes: int = 1_000_000
    session: bool = False
    bare: bool = False


@dataclass(eq=False, repr=False)
class WorkerSettings(Record):
    """A worker's settings, in INIT: the REPL's options and the sandbox's per-cell limits."""

    repl: ReplOptions
    output_chars: int = 20_000  # printed output kept per cell, head and tail
    cell_cpu_s: int = 0  # CPU seconds per cell (0: no limit, the local backend)


@dataclass(eq=False, repr=False)
class Rlimits(Record):
    """A worker's resource limits (rlmx.sandbox.isolation.ResourceLimits), in SETUP."""

    cpu_s: int
    memory_mb: int
    processes: int
    file_mb: int
    open_files: int


@dataclass(eq=False, repr=False)
class RpcFailure(Record):
    """Why the host did not answer a request: `budget` (a limit: BudgetExhaustedError in the cell) or
    `error` (SubcallError, or ToolError for a tool)."""

    kind: Literal["budget", "error"]
    message: str


WorkerIds = Literal["none", "shared", "per-worker"]
Layer = Literal["namespaces", "landlock", "none"]
LayerChoice = Literal["auto", "namespaces", "landlock", "none"]


@dataclass(eq=False, repr=False)
class IsolationReport(Record):
    """What the zygote could do: the layer its workers run in (`none`: unisolated), how worker ids are
    mapped, the host paths visible (namespaces) or readable (Landlock), the Landlock ABI the kernel
    offers, whether workers load the seccomp filter, why other layers were not used, and notes."""

    layer: Layer
    worker_ids: WorkerIds
    visible: list[str]
    landlock_abi: int = 0
    seccomp: bool = False
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --- frames --------------------------------------------------------------------------------------------


@dataclass(eq=False, repr=False)
class Frame(Record):
    TYPE: ClassVar[str] = ""
    ATTACHMENTS: ClassVar[frozenset[str]] = frozenset()

    def check(self) -> None:
        """Checks beyond the fields' types (ProtocolError)."""


# host -> worker


@dataclass(eq=False, repr=False)
class Init(Frame):
    """The first frame to a worker. `context_kind` is a payload kind (rlmx.context.payload) or
    INHERITED: the worker was forked holding the zygote's context; `context_options` are the context's
    own (prefilter, cache_dir, note); `history` is the list the run's messages are mirrored into."""

    TYPE = "init"
    ATTACHMENTS = frozenset({"context"})
    context_kind: str
    context_options: dict[str, Any]
    settings: WorkerSettings
    history: list[dict[str, Any]]


@dataclass(eq=False, repr=False)
class Exec(Frame):
    TYPE = "exec"
    id: int
    code: str
    history_append: list[dict[str, Any]]  # messages appended to the REPL's `history` before the cell


@dataclass(eq=False, repr=False)
class GetVar(Frame):
    TYPE = "get_var"
    id: int
    name: str


@dataclass(eq=False, repr=False)
class RpcResult(Frame):
    """The answer to an RPC: its `result` (any JSON value, passed to the code as it is), or `failure`."""

    TYPE = "rpc_result"
    id: int
    result: Any = None
    failure: RpcFailure | None = None


@dataclass(eq=False, repr=False)
class Shutdown(Frame):
    TYPE = "shutdown"


PutKind = Literal["inline-text", "inline-json", "none"]  # files are read by the host first
PUT_KINDS = frozenset(typing.get_args(PutKind))


@dataclass(eq=False, repr=False)
class Put(Frame):
    """A session's value put into a live REPL under a reserved name (`context_N`, `history_N`, or
    `history`: the list the current question's messages are mirrored into); the value is attached."""

    TYPE = "put"
    ATTACHMENTS = frozenset({"value"})
    id: int
    name: str
    context_kind: PutKind


@dataclass(eq=False, repr=False)
class Define(Frame):
    """A bare REPL's host functions (tool specs, as rlmx.repl.tools describes them) and its SUBMIT's
    fields ([{name}], or None: `SUBMIT(output)`), replacing those of the last DEFINE."""

    TYPE = "define"
    id: int
    tools: list[dict[str, Any]]
    outputs: list[dict[str, Any]] | None


@dataclass(eq=False, repr=False)
class Assign(Frame):
    """A value bound to a name in a bare REPL (attached as `value`), or with `reuse`, the value the last
    ASSIGN of that name sent, bound again (nothing attached)."""

    TYPE = "assign"
    ATTACHMENTS = frozenset({"value"})
    id: int
    name: str
    context_kind: PutKind
    reuse: bool


# worker -> host

# a bare REPL's cells end with `submit` (SUBMIT's fields), `value` (the trailing expression's) or
# `raised` ({type, message, args, syntax}: the error its code raised)
BARE_KINDS = ("submit", "value", "raised")
FINAL_KINDS = ("final", "final_var", "answer_dict", *BARE_KINDS)


@dataclass(eq=False, repr=False)
class Ready(Frame):
    TYPE = "ready"
    pid: int
    context_stats: dict[str, Any] | None  # what the worker loaded (rlmx.context.metadata)


@dataclass(eq=False, repr=False)
class ExecResult(Frame):
    """A cell's end: its output and error, the answer it gave (`final`: {kind, text | json}), the REPL's
    plain variables (when the dialect lists them), and `restart`: why the worker asks to be replaced."""

    TYPE = "exec_result"
    id: int
    output: str
    error: str | None
    final: dict[str, Any] | None
    variables: list[str]
    restart: str | None

    def check(self) -> None:
        if self.final is not None:
            check_value(self.final, kinds=FINAL_KINDS)


@dataclass(eq=False, repr=False)
class VarResult(Frame):
    """A variable's value ({text} or {json}), or why it cannot be read."""

    TYPE = "var_result"
    id: int
    value: dict[str, Any] | None
    error: str | None

    def check(self) -> None:
        if (self.value is None) == (self.error is None):
            raise ProtocolError("var_result: exactly one of value and error")
        if self.value is not None:
            check_value(self.value)


@dataclass(eq=False, repr=False)
class PutResult(Frame):
    TYPE = "put_result"
    id: int
    error: str | None  # None: the value was put


Method = Literal["llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "tool"]
RPC_METHODS = frozenset(typing.get_args(Method))  # the operations a worker may ask of the host


@dataclass(eq=False, repr=False)
class Rpc(Frame):
    """A request of the cell's code. params: llm_query {prompt, model, images?, detail?},
    llm_query_batched {prompts, model, images?, detail?}, rlm_query {prompt, model, context}, rlm_query_batched {prompts, model, contexts}, tool {name,
    args: [...], kwargs: {...}} (the host checks them again: rlmx.engine.subcalls, rlmx.engine.tools)."""

    TYPE = "rpc"
    ATTACHMENTS = ATTACHMENT_NAMES  # images a cell made, as bytes (rlmx.repl.image_refs)
    id: int
    method: Method
    params: dict[str, Any]


# host <-> zygote, on the zygote's control socket (see zygote.py)


@dataclass(eq=False, repr=False)
class Setup(Frame):
    """The zygote's one set-up frame: how to isolate, the workers' limits, and the run's context."""

    TYPE = "setup"
    ATTACHMENTS = frozenset({"context"})
    layer: LayerChoice  # auto: namespaces, else Landlock, else fail
    unavailable: dict[str, str]  # layers the host already knows cannot be built, and why
    uid_first: int  # the Landlock layer's worker uids (as root): uid_first .. uid_first + uid_count - 1
    uid_count: int
    limits: Rlimits
    scratch_mb: int
    staging: str  # where the isolated zygote mounts its new root before it pivots
    tmp_base: str
    context_kind: str
    context_options: dict[str, Any]


@dataclass(eq=False, repr=False)
class ZygoteReady(Frame):
    TYPE = "zygote_ready"
    isolation: IsolationReport


@dataclass(eq=False, repr=False)
class ZygoteFailed(Frame):
    TYPE = "zygote_failed"
    error: str  # it could not load the context or isolate itself


@dataclass(eq=False, repr=False)
class Spawn(Frame):
    TYPE = "spawn"
    id: int
    inherit: bool  # the worker keeps the zygote's context


@dataclass(eq=False, repr=False)
class Spawned(Frame):
    """The new worker; with it, as SCM_RIGHTS, [to-worker write end, from-worker read end, pidfd?]."""

    TYPE = "spawned"
    id: int
    pid: int
    workdir: str  # unisolated workers: a host directory to remove afterwards


# the context kind of an INIT whose worker was forked from a zygote that already holds the context
INHERITED = "inherited"

Direction = Mapping[str, type[Frame]]


def _direction(*kinds: type[Frame]) -> Direction:
    return types.MappingProxyType({kind.TYPE: kind for kind in kinds})


HOST_TO_WORKER = _direction(Init, Exec, GetVar, RpcResult, Shutdown, Put, Define, Assign)
WORKER_TO_HOST = _direction(Ready, ExecResult, VarResult, PutResult, Rpc)
HOST_TO_ZYGOTE = _direction(Setup, Spawn, Shutdown)
ZYGOTE_TO_HOST = _direction(ZygoteReady, ZygoteFailed, Spawned)


# --- encoding ------------------------------------------------------------------------------------------


def to_json(frame: Frame) -> dict[str, Any]:
    """The frame as its JSON object (without attachments)."""
    return {"type": frame.TYPE, **_plain_fields(frame)}


def _plain_fields(record: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _plain(value: Any) -> Any:
    return _plain_fields(value) if dataclasses.is_dataclass(value) else value


def _with_attachments(frame: Frame, sizes: list[tuple[str, int]]) -> dict[str, Any]:
    message = to_json(frame)
    unknown = [name for name, _ in sizes if name not in frame.ATTACHMENTS]
    if unknown:
        raise ProtocolError(f"{frame.TYPE} carries no attachment named {unknown[0]!r}")
    if sizes:
        message["attachments"] = [[name, size] for name, size in sizes]
    return message


def encode(frame: Frame, attachments: Mapping[str, bytes] | None = None) -> bytes:
    """The whole frame: header, JSON and attachments."""
    parts = dict(attachments or {})
    message = _with_attachments(frame, [(name, len(data)) for name, data in parts.items()])
    return wire.encode(message, b"".join(parts.values()))


def encode_header(frame: Frame, attachments: list[tuple[str, int]]) -> bytes:
    """The frame without its attachments' bytes, which the sender writes next, in order (a large
    context in pieces, never copied whole)."""
    message = _with_attachments(frame, attachments)
    return wire.encode_header(message, sum(size for _, size in attachments))


# --- decoding ------------------------------------------------------------------------------------------


def decode(message: dict[str, Any], blob: bytes, allowed: Direction) -> tuple[Frame, dict[str, bytes]]:
    """A received message as the frame it must be, and its attachments by name."""
    kind = message.get("type")
    cls = allowed.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"a {kind!r} frame is not allowed here")
    fields = {k: v for k, v in message.items() if k not in ("type", "attachments")}
    frame = _build(cls, fields, cls.TYPE)
    frame.check()
    return frame, _split(cls, message.get("attachments", []), blob)


def _split(cls: type[Frame], listed: Any, blob: bytes) -> dict[str, bytes]:
    if not isinstance(listed, list) or not all(
        isinstance(a, list) and len(a) == 2 and isinstance(a[0], str) and _is_int(a[1]) and a[1] >= 0
        for a in listed
    ):
        raise ProtocolError(f"{cls.TYPE}: malformed attachments list")
    names = [name for name, _ in listed]
    if len(set(names)) != len(names) or not set(names) <= cls.ATTACHMENTS:
        raise ProtocolError(f"{cls.TYPE} may not carry attachments {names}")
    if sum(size for _, size in listed) != len(blob):
        raise ProtocolError(f"{cls.TYPE}: the attachments' sizes do not add up to the blob's")
    if len(listed) == 1:
        return {names[0]: blob}  # the whole blob, not a copy (a 40 MB context)
    parts, offset = {}, 0
    for name, size in listed:
        parts[name] = bytes(memoryview(blob)[offset : offset + size])
        offset += size
    return parts


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _build(cls: type, fields: Any, where: str) -> Any:
    if not isinstance(fields, dict):
        raise ProtocolError(f"{where}: expected an object")
    declared = {f.name for f in dataclasses.fields(cls)}
    unknown = set(fields) - declared
    missing = declared - set(fields)
    if unknown or missing:
        which = (
            f"unknown field {sorted(unknown)[0]!r}" if unknown else f"missing field {sorted(missing)[0]!r}"
        )
        raise ProtocolError(f"{where}: {which}")
    hints = _hints(cls)
    return cls(**{name: _checked(fields[name], hints[name], f"{where}.{name}") for name in declared})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _checked(value, option, where)
            except ProtocolError:
                continue
        raise ProtocolError(f"{where}: {_kind(value)} is not allowed")
    if origin is Literal:
        if value not in typing.get_args(hint) or isinstance(value, bool):
            raise ProtocolError(f"{where}: {str(value)[:80]!r} is not one of {typing.get_args(hint)}")
        return value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list, got {_kind(value)}")
        (item,) = typing.get_args(hint)
        return [_checked(v, item, f"{where}[]") for v in value]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ProtocolError(f"{where}: expected an object, got {_kind(value)}")
        _, item = typing.get_args(hint)
        return {k: _checked(v, item, f"{where}.{k}") for k, v in value.items()}
    simple = {type(None): lambda v: v is None, bool: lambda v: isinstance(v, bool), int: _is_int}
    simple[str] = lambda v: isinstance(v, str)
    test = simple.get(hint)
    if test is None:
        raise TypeError(f"frames: no check for {hint!r}")  # a bug here, not in the sender
    if not test(value):
        raise ProtocolError(f"{where}: expected {getattr(hint, '__name__', hint)}, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_value(value: dict[str, Any], *, kinds: tuple[str, ...] = ()) -> None:
    """A value as a worker sends it: {"text": str} or {"json": any}, with a `kind` from `kinds` if given."""
    keys = set(value) - ({"kind"} if kinds else set())
    if kinds and value.get("kind") not in kinds:
        raise ProtocolError(f"a value's kind must be one of {kinds}")
    if keys == {"text"} and isinstance(value["text"], str):
        return
    if keys != {"json"}:
        raise ProtocolError("a value must be {text: str} or {json: ...}")


# --- blocking reads and writes (the worker's and the zygote's side) ------------------------------------


def read(fd: int, allowed: Direction) -> tuple[Frame, dict[str, bytes]]:
    message, blob = wire.read_frame(fd)
    return decode(message, blob, allowed)


def write(fd: int, frame: Frame, attachments: Mapping[str, bytes] | None = None) -> None:
    data = memoryview(encode(frame, attachments))
    while data:
        written = os.write(fd, data)
        data = data[written:]
