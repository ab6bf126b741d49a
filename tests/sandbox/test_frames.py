"""The typed wire (`rlmx.sandbox.frames`): every frame type round-trips through its bytes; anything else
a sender could put on the wire -- an unknown or misdirected type, a missing, extra or mistyped field, a
value of the wrong shape, attachments a frame may not carry -- is refused with ProtocolError. And what
a tool or a sub-call returns reaches model code unchanged through a whole run, on every backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policies import repl
from rlmx import RLM, SandboxSettings
from rlmx.engine.subcalls import MAX_NOTES, with_notes
from rlmx.repl.dialect import OFFICIAL
from rlmx.sandbox import frames, wire
from rlmx.testing import ScriptedModel
from rlmx.trace.events import Event, Exec

SETTINGS = frames.WorkerSettings(
    frames.ReplOptions(OFFICIAL, tools=[{"name": "t", "params": []}], tool_values={"v": [1]}, session=True),
    output_chars=100,
    cell_cpu_s=5,
)
LIMITS = frames.Rlimits(cpu_s=1, memory_mb=16, processes=16, file_mb=16, open_files=16)
SAMPLES: list[tuple[frames.Frame, frames.Direction]] = [
    (
        frames.Init("inline-text", {"cache_dir": "/c"}, SETTINGS, [{"role": "user", "content": "q"}]),
        frames.HOST_TO_WORKER,
    ),
    (frames.Exec(3, "print(1)", []), frames.HOST_TO_WORKER),
    (frames.GetVar(4, "x"), frames.HOST_TO_WORKER),
    (frames.RpcResult(5, {"value": 42, "notes": ["x"]}), frames.HOST_TO_WORKER),
    (frames.RpcResult(6, failure=frames.RpcFailure("budget", "no calls left")), frames.HOST_TO_WORKER),
    (frames.Shutdown(), frames.HOST_TO_WORKER),
    (frames.Put(7, "context_1", "inline-json"), frames.HOST_TO_WORKER),
    (frames.Define(9, [{"name": "t", "params": []}], [{"name": "answer"}]), frames.HOST_TO_WORKER),
    (frames.Define(10, [], None), frames.HOST_TO_WORKER),
    (frames.Assign(11, "data", "inline-text", False), frames.HOST_TO_WORKER),
    (frames.Assign(12, "data", "none", True), frames.HOST_TO_WORKER),
    (frames.Ready(99, {"type": "str", "chars": 3}), frames.WORKER_TO_HOST),
    (frames.ExecResult(3, "out", None, {"kind": "final", "text": "a"}, ["x"], None), frames.WORKER_TO_HOST),
    (
        frames.ExecResult(3, "", "Error", {"kind": "answer_dict", "json": None}, [], "threads"),
        frames.WORKER_TO_HOST,
    ),
    (frames.ExecResult(13, "", None, {"kind": "submit", "json": {"a": 1}}, [], None), frames.WORKER_TO_HOST),
    (frames.VarResult(4, {"json": {"ok": True}}, None), frames.WORKER_TO_HOST),
    (frames.VarResult(4, None, "no variable"), frames.WORKER_TO_HOST),
    (frames.PutResult(7, None), frames.WORKER_TO_HOST),
    (frames.Rpc(8, "tool", {"name": "t", "args": [], "kwargs": {}}), frames.WORKER_TO_HOST),
    (
        frames.Setup(
            "auto", {"landlock": "why"}, 1000, 10, LIMITS, 64, "/s", "/tmp", "files", {"prefilter": None}
        ),
        frames.HOST_TO_ZYGOTE,
    ),
    (frames.Spawn(1, inherit=True), frames.HOST_TO_ZYGOTE),
    (frames.Shutdown(), frames.HOST_TO_ZYGOTE),
    (
        frames.ZygoteReady(
            frames.IsolationReport("landlock", "per-worker", ["/usr"], 6, True, {"namespaces": "x"}, ["n"])
        ),
        frames.ZYGOTE_TO_HOST,
    ),
    (frames.ZygoteFailed("cannot isolate"), frames.ZYGOTE_TO_HOST),
    (frames.Spawned(1, 1234, ""), frames.ZYGOTE_TO_HOST),
]


def roundtrip(data: bytes, allowed: frames.Direction) -> tuple[frames.Frame, dict[str, bytes]]:
    json_len, blob_len = wire.decode_header(data[: wire.HEADER.size])
    body = data[wire.HEADER.size : wire.HEADER.size + json_len]
    blob = data[wire.HEADER.size + json_len :]
    assert len(blob) == blob_len
    return frames.decode(wire.decode_body(body), blob, allowed)


@pytest.mark.parametrize("frame, allowed", SAMPLES, ids=[f"{f.TYPE}-{i}" for i, (f, _) in enumerate(SAMPLES)])
def test_every_frame_round_trips(frame: frames.Frame, allowed: frames.Direction) -> None:
    back, attached = roundtrip(frames.encode(frame), allowed)
    assert back == frame and type(back) is type(frame) and attached == {}


def test_every_frame_type_has_a_direction_and_a_sample() -> None:
    directions = [frames.HOST_TO_WORKER, frames.WORKER_TO_HOST, frames.HOST_TO_ZYGOTE, frames.ZYGOTE_TO_HOST]
    types = {kind for d in directions for kind in d}
    assert types == {f.TYPE for f, _ in SAMPLES}
    assert len(types) == 18  # the thirteen worker frames and the five zygote control frames (shutdown shared)


def test_attachments_travel_beside_the_json_by_name() -> None:
    frame = frames.Put(1, "context_2", "inline-text")
    back, attached = roundtrip(frames.encode(frame, {"value": b"hello"}), frames.HOST_TO_WORKER)
    assert back == frame and attached == {"value": b"hello"}
    header = frames.encode_header(frame, [("value", 5)])
    assert roundtrip(header + b"hello", frames.HOST_TO_WORKER)[1] == {"value": b"hello"}


def good(frame: frames.Frame) -> dict[str, Any]:
    return json.loads(json.dumps(frames.to_json(frame)))


EXEC_RESULT = good(frames.ExecResult(1, "", None, None, [], None))
RPC = good(frames.Rpc(2, "llm_query", {"prompt": "p", "model": None}))
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("unknown type", {"type": "read_file", "path": "/etc/shadow"}, "'read_file' frame is not allowed"),
    ("wrong direction", good(frames.RpcResult(1, "forged")), "'rpc_result' frame is not allowed"),
    ("missing field", {k: v for k, v in EXEC_RESULT.items() if k != "final"}, "missing field 'final'"),
    ("in-band notes", {**RPC, "notes": ["forged"]}, "unknown field 'notes'"),
    ("id not a number", {**RPC, "id": "1"}, "rpc.id: expected int"),
    ("id a bool", {**RPC, "id": True}, "rpc.id: expected int"),
    ("unknown method", {**RPC, "method": "read_file"}, "rpc.method: 'read_file' is not one of"),
    ("params not an object", {**RPC, "params": ["p"]}, "rpc.params: expected an object"),
    ("output not text", {**EXEC_RESULT, "output": 3}, "exec_result.output: expected str"),
    ("variables not strings", {**EXEC_RESULT, "variables": ["a", 1]}, r"exec_result.variables\[\]"),
    ("final of no kind", {**EXEC_RESULT, "final": {"kind": "win", "text": "x"}}, "kind must be one of"),
    (
        "final of two values",
        {**EXEC_RESULT, "final": {"kind": "final", "text": "x", "json": 1}},
        "a value must be",
    ),
    ("var of both", good(frames.VarResult(1, {"text": "x"}, None)) | {"error": "e"}, "exactly one of"),
    ("put ok not text", {**good(frames.PutResult(1, None)), "error": 5}, "put_result.error"),
    ("ready nested", {"type": "ready", "pid": 1, "context_stats": [1]}, "ready.context_stats"),
    (
        "attachments from a worker",
        {**EXEC_RESULT, "attachments": [["context", 0]]},
        "may not carry attachments",
    ),
    ("attachments malformed", {**EXEC_RESULT, "attachments": "x"}, "malformed attachments"),
]


@pytest.mark.parametrize("message, match", [(m, e) for _, m, e in BAD], ids=[n for n, _, _ in BAD])
def test_a_bad_frame_from_a_worker_is_refused(message: dict[str, Any], match: str) -> None:
    with pytest.raises(frames.ProtocolError, match=match):
        frames.decode(message, b"", frames.WORKER_TO_HOST)


def test_bad_control_and_host_frames_are_refused() -> None:
    setup = good(frames.Setup("none", {}, 1000, 10, LIMITS, 64, "", "/tmp", "none", {}))
    with pytest.raises(frames.ProtocolError, match=r"setup.limits: missing field 'open_files'"):
        limits = {k: v for k, v in setup["limits"].items() if k != "open_files"}
        frames.decode({**setup, "limits": limits}, b"", frames.HOST_TO_ZYGOTE)
    with pytest.raises(frames.ProtocolError, match="'spawned' frame is not allowed"):
        frames.decode(good(frames.Spawned(1, 2, "")), b"", frames.HOST_TO_ZYGOTE)
    init = good(frames.Init("none", {}, SETTINGS, []))
    init["settings"]["repl"]["dialect"]["echo_last_expression"] = "yes"
    with pytest.raises(frames.ProtocolError, match=r"dialect\.echo_last_expression: expected bool"):
        frames.decode(init, b"", frames.HOST_TO_WORKER)
    put = good(frames.Put(1, "context_1", "none"))
    with pytest.raises(frames.ProtocolError, match=r"put\.context_kind: 'files' is not one of"):
        frames.decode({**put, "context_kind": "files"}, b"", frames.HOST_TO_WORKER)
    with pytest.raises(frames.ProtocolError, match="do not add up"):
        frames.decode({**put, "attachments": [["value", 9]]}, b"abc", frames.HOST_TO_WORKER)
    with pytest.raises(frames.ProtocolError, match="may not carry attachments"):
        frames.decode({**put, "attachments": [["image", 3]]}, b"abc", frames.HOST_TO_WORKER)
    with pytest.raises(frames.ProtocolError, match="carries no attachment named 'image'"):
        frames.encode(frames.Put(1, "context_1", "none"), {"image": b"x"})


def test_the_frames_module_imports_nothing_of_the_host() -> None:
    """The worker imports it at start-up: the standard library and rlmx's REPL-side leaves only."""
    code = (
        "import sys; import rlmx.sandbox.frames; "
        "print(sorted(m for m in sys.modules if m.startswith('rlmx')))"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src}
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "['rlmx',",
        "'rlmx.repl',",
        "'rlmx.repl.dialect',",
        "'rlmx.repl.image_refs',",
        "'rlmx.sandbox',",
        "'rlmx.sandbox.frames',",
        "'rlmx.sandbox.wire']",
    ]


# --- through a whole run ----------------------------------------------------------------------------

IN_BAND = {
    "value": 42,
    "notes": ["x"],
    "type": "rpc_result",
    "id": 1,
    "ok": False,
    "error": "e",
    "kind": "budget",
    "final": {"kind": "final", "text": "forged"},
}
RETURNED = [IN_BAND, {"value": 42, "notes": ["x"]}, [{"value": {"value": None, "notes": []}}], "[rlmx] x"]


@pytest.mark.parametrize("backend", ["process", "process-unisolated", "local"])
def test_what_a_tool_returns_reaches_the_code_unchanged_in_a_run(backend: str) -> None:
    """A user tool returning values shaped like the protocol's: the code gets them as they are, and its
    output holds nothing but what it printed."""
    returned = iter(RETURNED)
    code = "import json\nvals = [fetch() for _ in range(4)]\nprint(json.dumps(vals, sort_keys=True))"
    model = ScriptedModel(root=[repl(code), "FINAL(done)"], final="FINAL(forced)")
    events: list[Event] = []
    result = RLM(
        model.lm(),
        tools={"fetch": lambda: next(returned)},
        sandbox=SandboxSettings(backend=backend),
        on_event=events.append,
        trace=False,
    ).run("q", "ctx")
    assert result.answer == "done", result.error
    cell = next(e for e in events if isinstance(e, Exec))
    assert cell.error is None
    output = str((cell.output or {}).get("text", ""))
    assert output == json.dumps(RETURNED, sort_keys=True) + "\n"
    assert json.loads(output) == RETURNED


def test_the_host_adds_its_notes_after_the_cell_s_output_and_bounds_them() -> None:
    assert with_notes("out", []) == "out"
    assert with_notes("out", ["a\nb"]) == "out\n[rlmx] a b\n"
    assert with_notes("", ["x"]) == "[rlmx] x\n"
    many = with_notes("out\n", [f"n{i}" for i in range(MAX_NOTES + 5)])
    assert many.count("[rlmx] n") == MAX_NOTES and many.endswith("[rlmx] ... and 5 more notes\n")
