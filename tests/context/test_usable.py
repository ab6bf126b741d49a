"""Empty and unusable contexts: refused before any model call with a message a user can act on, skipped
files summed up in one line, metadata that counts only what the REPL will hold, and FIFOs that never
block (issue 13, "Trustworthy at the edges")."""

from __future__ import annotations

import io
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlmx.context import Context
from rlmx.context.formats import read_file, sniff_file
from rlmx.context.loaders import context_from_specs
from rlmx.context.payload import load_payload
from rlmx.errors import ConfigError, EmptyContext

OVERRIDE = "pass `allow_empty_context`=True to run anyway"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40


def refused(context: Context) -> str:
    """The EmptyContext message check_usable raises: one line, ending with the way to run anyway."""
    with pytest.raises(EmptyContext) as info:
        context.check_usable()
    message = str(info.value)
    assert "\n" not in message and message.endswith(OVERRIDE)
    assert isinstance(info.value, ConfigError)  # the CLI's exit code 2
    return message


def worker_load(context: Context) -> tuple[Any, dict[str, Any]]:
    """What the REPL worker builds from the payload: (value, stats)."""
    loaded = load_payload(context.payload())
    return loaded.value, loaded.stats


def within(seconds: float, fn: Callable[[], Any], unblock: Path | None = None) -> Any:
    """fn() in a thread: a call still running after `seconds` fails the test instead of hanging it
    (and, when `unblock` is a FIFO, a writer is opened on it so the stuck thread can finish)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if unblock is not None:
            try:
                os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        pytest.fail(f"still blocked after {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture()
def binaries(tmp_path: Path) -> Path:
    root = tmp_path / "assets"
    root.mkdir()
    (root / "a.png").write_bytes(PNG)
    (root / "b.bin").write_bytes(b"\x00\x01\x02\x03" * 5000)
    (root / "notes.txt").write_text("")
    return root


# --- folders and files where nothing is usable -----------------------------------------------------


def test_binary_only_folder_is_refused_and_its_metadata_counts_nothing(binaries: Path) -> None:
    context = Context.from_paths(binaries)
    message = refused(context)
    assert message.startswith(f"context {binaries} holds no usable text: all 3 files were skipped")
    assert "2 binary (a.png, b.bin), 1 empty (notes.txt)" in message
    assert context.skipped_summary() == "skipped 3 of 3 files: 2 binary (a.png, b.bin), 1 empty (notes.txt)"
    stats = context.stats()  # what run_start.context_meta and the first prompt are built from
    assert stats["count"] == 0 and stats["chars"] == 0
    assert stats["skipped"]["by_reason"] == {"binary": 2, "empty": 1}
    meta = context.describe()
    assert meta.startswith("Your context is an empty list.") and "tokens" not in meta
    assert "Left out 3 files (2 binary, 1 empty)" in meta
    value, worker_stats = worker_load(context)  # the worker agrees: it holds nothing either
    assert value == [] and worker_stats["skipped"]["by_reason"] == {"binary": 2, "empty": 1}


def test_mixed_folder_counts_only_text_documents(binaries: Path) -> None:
    (binaries / "readme.md").write_text("# Assets\nicons and fonts\n")
    (binaries / "log.txt").write_text("started\n")
    context = Context.from_paths(binaries)
    context.check_usable()
    assert context.skipped_summary() == "skipped 3 of 5 files: 2 binary (a.png, b.bin), 1 empty (notes.txt)"
    stats = context.stats()
    assert stats["kind"] == "documents" and stats["count"] == 2
    assert stats["chars"] == len("# Assets\nicons and fonts\n") + len("started\n")  # no binary bytes
    assert "list of 2 documents" in context.describe()
    value, worker_stats = worker_load(context)
    assert [d["path"] for d in value] == ["log.txt", "readme.md"]
    assert worker_stats["count"] == stats["count"] and worker_stats["skipped"] == stats["skipped"]


def test_summary_stays_short_with_many_skipped_files(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"img{i:02d}.png").write_bytes(PNG)
    for i in range(5):
        (tmp_path / f"blank{i}.txt").write_text("  \n\t\n")
    (tmp_path / "keep.txt").write_text("the one text file\n")
    context = Context.from_paths(tmp_path)
    context.check_usable()
    summary = context.skipped_summary()
    assert summary == (
        "skipped 45 of 46 files: 40 binary (img00.png, img01.png, ...), 5 empty (blank0.txt, ...)"
    )


def test_single_binary_empty_and_blank_files(tmp_path: Path) -> None:
    image = tmp_path / "photo.png"
    image.write_bytes(PNG)  # a PNG's signature, then junk: no image document (rlmx.images.probe)
    context = Context.from_paths(image)
    message = refused(context)
    assert message.startswith(
        f"context {image} holds no usable text: it is binary (not a readable PNG, JPEG, WebP or GIF);"
    )
    assert context.skipped_summary() == f"skipped 1 of 1 file: 1 binary ({image})"
    assert context.describe().startswith("There is no context for this question (`context` is None).")
    assert worker_load(context)[0] is None  # what the REPL's `context` is with --allow-empty-context

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert "it is empty;" in refused(Context.from_paths(empty))
    assert worker_load(Context.from_paths(empty))[0] == ""
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b" \n\t\r\n" * 5000)  # whitespace beyond the first 8 KiB: still empty, as read
    assert "it is empty;" in refused(Context.from_paths(blank))
    assert read_file(str(blank), "text").skip == "empty"


def test_empty_folder_and_several_unusable_inputs(tmp_path: Path, binaries: Path) -> None:
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    message = refused(Context.from_paths(nothing))
    assert message.startswith(f"context {nothing} holds no usable text: it has no files;")
    two = refused(Context.from_paths([binaries / "a.png", binaries / "notes.txt"]))
    assert "all 2 files were skipped: 1 binary" in two and "1 empty" in two
    assert refused(Context.from_paths([])).startswith("no context paths were given")


def test_globs_gitignore_and_dotfiles_that_leave_nothing(tmp_path: Path) -> None:
    root = tmp_path / "src"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    (root / "util.py").write_text("X = 1\n")
    message = refused(Context.from_paths(root, include=["*.rs"]))
    assert "no file is left once 2 not matching `include` are left out" in message
    assert "fix the `include`/`exclude` globs" in message
    assert "2 matching `exclude`" in refused(Context.from_paths(root, exclude=["*.py"]))
    (root / ".gitignore").write_text("*.py\n")
    (root / ".env").write_text("SECRET=1\n")
    ignored = refused(Context.from_paths(root))
    assert "2 ignored by .gitignore and 2 hidden (dotfiles) are left out" in ignored, ignored
    assert "`gitignore`=False" in ignored and "hidden=True" in ignored
    Context.from_paths(root, gitignore=False).check_usable()  # the way out the message names
    assert Context.from_paths(root, include=["*.rs"]).skipped_summary() is None  # nothing *skipped*


def test_skipped_files_besides_the_globs_are_both_named(binaries: Path) -> None:
    (binaries / "script.py").write_text("print(1)\n")
    message = refused(Context.from_paths(binaries, exclude=["*.py"]))
    assert "all 3 files were skipped: 2 binary (a.png, b.bin), 1 empty (notes.txt)" in message
    assert "besides, 1 matching `exclude` is left out" in message


# --- standard input and pipes -------------------------------------------------------------------


def test_empty_stdin_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    context = context_from_specs(["-"], stdin=io.StringIO(""))
    assert context is not None
    message = refused(context)
    assert message.startswith("standard input ('-') holds no usable text: it is empty; pipe some text in")
    assert worker_load(context)[0] == ""
    blank = context_from_specs(["-"], stdin=io.StringIO("  \n\n"))
    assert blank is not None and "it is empty" in refused(blank)
    # the real standard input is read as bytes: binary data is left out like a binary file
    fake = io.TextIOWrapper(io.BytesIO(PNG), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    piped = context_from_specs(["-"])
    assert piped is not None and "it is binary" in refused(piped)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("héllo\n".encode()), encoding="utf-8"))
    text = context_from_specs(["-"])
    assert text is not None and text.load() == "héllo\n"
    text.check_usable()


def test_empty_stdin_beside_files_is_a_skipped_document(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    context = context_from_specs(["-", str(tmp_path / "a.txt")], stdin=io.StringIO(""))
    assert context is not None
    context.check_usable()
    assert context.skipped_summary() == "skipped 1 of 2 files: 1 empty (<stdin>)"
    value, _ = worker_load(context)
    assert value == [{"path": str(tmp_path / "a.txt"), "text": "alpha\n"}]


def test_empty_anonymous_pipe_is_refused_but_not_blocked() -> None:
    read_fd, write_fd = os.pipe()
    os.close(write_fd)  # like <(true): a pipe whose writer is gone
    try:
        context = within(5, lambda: Context.from_paths(f"/dev/fd/{read_fd}"))
    finally:
        os.close(read_fd)
    assert "it is empty" in refused(context)


# --- values in memory -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ("", "it is an empty str"),
        ("  \n\t ", "it is only whitespace (5 characters)"),
        ([], "it is an empty list"),
        ({}, "it is an empty dict"),
        ((), "it is an empty tuple"),
        (b"", "it is empty bytes"),
        (b"\x00\x01\x02\x03PK", "it is bytes that are not text (binary)"),
        (["", "  "], "it is a list of 2 items that are all empty text"),
        ([{"path": "a", "text": ""}], "it is a list of 1 item that is empty text"),
    ],
)
def test_unusable_values_in_memory(value: Any, what: str) -> None:
    message = refused(Context.of(value))
    assert message.startswith(f"the context holds no usable text: {what};")
    assert Context.of(value).skipped_summary() is None


@pytest.mark.parametrize("value", ["x", [1, 2, 3], [{"id": 1}], {"a": 1}, 0, b"plain text\n", None])
def test_usable_values_in_memory(value: Any) -> None:
    Context.of(value).check_usable()  # numbers, records and dicts are usable; None is "no context"


def test_bytes_of_text_become_text() -> None:
    assert Context.of("café\n".encode()).load() == "café\n"


# --- FIFOs, sockets and devices ---------------------------------------------------------------------


def test_fifo_named_as_a_context_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "incoming"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as info:
        within(5, lambda: Context.from_paths(fifo), unblock=fifo)
    message = str(info.value)
    assert not isinstance(info.value, EmptyContext)
    assert message.startswith(f"context path {fifo} is a FIFO (named pipe), not a file")
    assert "pipe the data in with '-'" in message and "\n" not in message
    with pytest.raises(ConfigError, match="is a FIFO"):
        within(5, lambda: context_from_specs([str(fifo)]), unblock=fifo)


def test_socket_and_device_named_as_a_context_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"context path /dev/null is a device, not a file"):
        within(5, lambda: Context.from_paths("/dev/null"))
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(ConfigError, match=r"is a socket, not a file"):
            within(5, lambda: Context.from_paths(path))
    finally:
        server.close()


def test_fifo_in_a_folder_is_skipped_and_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    root.mkdir()
    os.mkfifo(root / "queue")
    context = within(5, lambda: Context.from_paths(root), unblock=root / "queue")
    message = refused(context)
    assert "its one file was skipped: 1 not a regular file (queue)" in message
    assert context.skipped_summary() == "skipped 1 of 1 file: 1 not a regular file (queue)"
    (root / "ok.txt").write_text("fine\n")
    (root / ".gitignore").unlink(missing_ok=True)
    os.mkfifo(root / ".gitignore")  # a .gitignore that is a FIFO is not read either
    context = within(5, lambda: Context.from_paths(root), unblock=root / ".gitignore")
    value, stats = within(5, lambda: worker_load(context), unblock=root / "queue")
    assert value == [{"path": "ok.txt", "text": "fine\n"}]
    assert stats["skipped"]["examples"] == ["queue: not a regular file (FIFO)"]


def test_worker_reader_refuses_a_fifo_swapped_in_after_the_scan(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("was a file\n")
    context = Context.from_paths(tmp_path)
    path.unlink()
    os.mkfifo(path)  # between the host's scan and the worker's read
    value, stats = within(5, lambda: worker_load(context), unblock=path)
    assert value == [] and stats["skipped"]["examples"] == ["data.txt: not a regular file (FIFO)"]
    assert within(5, lambda: read_file(str(path), "text"), unblock=path).skip == "not a regular file (FIFO)"
    assert within(5, lambda: sniff_file(str(path), "text"), unblock=path) == "not a regular file (FIFO)"


# --- what only the worker can tell ------------------------------------------------------------------


def test_check_loaded_refuses_what_the_worker_could_not_read(tmp_path: Path) -> None:
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n")
    context = Context.from_paths(tmp_path)
    context.check_usable()  # the host cannot judge a PDF from its first KiB
    _, stats = worker_load(context)
    with pytest.raises(EmptyContext) as info:
        context.check_loaded(stats)
    message = str(info.value)
    assert message.startswith(f"context {tmp_path} holds no usable text: its one file was left out once read")
    assert "1 broken PDF" in message and "scan.pdf: broken PDF" in message and message.endswith(OVERRIDE)
    (tmp_path / "notes.txt").write_text("text\n")
    usable = Context.from_paths(tmp_path)
    usable.check_loaded(worker_load(usable)[1])
