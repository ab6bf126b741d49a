"""Reading one file by its format: text, PDF, HTML, JSONL, CSV, JSON. Runs in the REPL worker.

A file that cannot be used (binary, undecodable, empty, unreadable, a broken PDF) gives a `FileRead` with
`skip` set to a short reason instead of raising: one bad file never stops a load.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import stat
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any, BinaryIO

from rlmx.context.decode import SNIFF_BYTES, decode_bytes, looks_binary
from rlmx.images.probe import HEAD_BYTES, IMAGE_SUFFIXES, UNREADABLE, probe

PDF_PAGE_BREAK = "\f\n"  # form feed ends each page's last line, as pdftotext does
_FORMATS = {
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    **dict.fromkeys(IMAGE_SUFFIXES, "image"),
}
RECORD_FORMATS = frozenset({"jsonl", "csv", "json"})  # a single file of these becomes records, not text
EXTRA_HINT = "pip install 'rlmx[context]'"


@dataclass
class FileRead:
    text: str | None = None  # the document's text
    value: Any = None  # records (JSONL/CSV) or the parsed JSON, when read as records
    note: str | None = None  # something the model should know (an encoding guess, replaced bytes)
    skip: str | None = None  # why the file is left out


def image_document(path: str, name: str, size: int) -> dict[str, Any] | None:
    """An image file as a document: its path, no text, and its figures under "image" (format, width,
    height, bytes); None when its first bytes are not an image. The pixels stay on disk."""
    f, _ = open_regular(path)
    if f is None:
        return None
    try:
        with f:
            info = probe(f.read(HEAD_BYTES))
    except OSError:
        return None
    if info is None:
        return None
    figures = {"format": info.format, "width": info.width, "height": info.height, "bytes": size}
    return {"path": name, "text": "", "image": figures}


def format_of(name: str) -> str:
    return _FORMATS.get(PurePath(name).suffix.lower(), "text")


def file_type(mode: int) -> str:
    """What a file that is not a regular one is, in a word or two."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISDIR(mode):
        return "folder"
    return "special file"


def _unreadable(exc: OSError) -> str:
    return f"unreadable ({exc.strerror or type(exc).__name__})"


def open_regular(path: str) -> tuple[BinaryIO | None, str | None]:
    """The file open for reading, or (None, why not). Only regular files are opened: a FIFO, socket or
    device is refused from its `stat` (a FIFO's open would wait for a writer; a device's may act), and
    the open itself is non-blocking, so one swapped in after the `stat` is refused from `fstat` too."""
    try:
        if not stat.S_ISREG(mode := os.stat(path).st_mode):
            return None, f"not a regular file ({file_type(mode)})"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        return None, _unreadable(exc)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        return None, f"not a regular file ({file_type(mode)})"
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), None


def sniff_file(path: str, fmt: str) -> str | None:
    """Why `read_file` would leave this file out, judged from its first few KiB; None when it may be
    text. Runs in the host while it lists files, so its metadata never counts what the REPL will not
    hold. It agrees with `read_file`: the same open, the same empty test, the same binary test on the
    same first `SNIFF_BYTES` (a PDF is judged by the worker alone)."""
    f, why = open_regular(path)
    if f is None:
        return why
    try:
        with f:
            head = f.read(HEAD_BYTES if fmt == "image" else SNIFF_BYTES)
            if not head:
                return "empty"
            if fmt == "image":
                return None if probe(head) else UNREADABLE
            if _blank(f, head):
                return "empty"
    except OSError as exc:
        return _unreadable(exc)
    if fmt != "pdf" and looks_binary(head):
        return "binary"
    return None


_BLANK_SCAN_LIMIT = 1 << 20  # whitespace runs longer than this are left for the worker to judge


def _blank(f: BinaryIO, head: bytes) -> bool:
    """Whether the file holds nothing but (ASCII) whitespace, as `read_file` tests it. Reads on only
    while all it has seen is whitespace, and at most `_BLANK_SCAN_LIMIT` bytes."""
    chunk, seen = head, len(head)
    while not chunk or chunk.isspace():
        if len(chunk) < SNIFF_BYTES:  # a short read: the end of the file
            return True
        if seen >= _BLANK_SCAN_LIMIT:
            return False
        chunk = f.read(SNIFF_BYTES)
        seen += len(chunk)
    return False


def read_file(path: str, fmt: str, *, as_records: bool = False) -> FileRead:
    """Read and convert one file. `as_records`: JSONL/CSV give a list of dicts, JSON its value."""
    f, why = open_regular(path)
    if f is None:
        return FileRead(skip=why)
    try:
        with f:
            data = f.read()
    except OSError as exc:
        return FileRead(skip=_unreadable(exc))
    if not data or data.isspace():
        return FileRead(skip="empty")
    if fmt == "pdf":
        return pdf_text(data)
    if fmt == "image":  # never read whole here: image documents come from `image_document`
        return FileRead(skip="an image (read as an image document)")
    decoded = decode_bytes(data)
    del data
    if decoded.text is None:
        return FileRead(skip=decoded.skip)
    text = decoded.text
    if fmt == "html":
        text = html_text(text)
        if not text.strip():
            return FileRead(skip="no text in the HTML")
    if as_records and fmt in RECORD_FORMATS:
        return _records(text, fmt, path, decoded.note)
    return FileRead(text=text, note=decoded.note)


def _records(text: str, fmt: str, path: str, note: str | None) -> FileRead:
    if fmt == "json":
        try:
            return FileRead(value=json.loads(text), note=note)
        except json.JSONDecodeError as exc:
            return FileRead(
                text=text,
                note=_join(note, f"not valid JSON ({exc.msg} at line {exc.lineno}); loaded as text"),
            )
    if fmt == "jsonl":
        records, bad = jsonl_records(text)
        if bad:
            note = _join(note, f"{bad} line(s) that are not JSON were left out")
        return FileRead(value=records, note=note)
    return FileRead(value=csv_records(text, tab=path.lower().endswith(".tsv")), note=note)


def _join(a: str | None, b: str) -> str:
    return f"{a}; {b}" if a else b


def jsonl_records(text: str) -> tuple[list[Any], int]:
    records: list[Any] = []
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    return records, bad


def csv_records(text: str, *, tab: bool = False) -> list[dict[str, Any]]:
    """Rows as dicts keyed by the header row; values stay strings. Extra cells go under "_extra"."""
    dialect: Any = csv.excel_tab if tab else csv.excel
    if not tab:
        try:
            dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
    reader = csv.DictReader(io.StringIO(text, newline=""), dialect=dialect, restkey="_extra")
    return [dict(row) for row in reader]


# ----------------------------------------------------------------------------- PDF


def pdf_text(data: bytes) -> FileRead:
    try:
        from pypdf import PdfReader
    except ImportError:
        return FileRead(skip=f"PDF support needs pypdf ({EXTRA_HINT})")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-file warnings would flood stderr
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return FileRead(skip="encrypted PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
    except Exception as exc:  # pypdf raises many kinds of errors on damaged files; each one means "broken"
        return FileRead(skip=f"broken PDF ({type(exc).__name__}: {str(exc)[:120]})")
    text = PDF_PAGE_BREAK.join(page.rstrip("\n") for page in pages)
    if not text.strip():
        return FileRead(skip="no extractable text in the PDF (scanned pages?)")
    return FileRead(text=text, note=None)


# ----------------------------------------------------------------------------- HTML

_PRE_SPACE, _PRE_TAB = "\ue000", "\ue001"
_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg"})
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt fieldset figcaption figure footer form h1 h2 h3 h4 "
    "h5 h6 header hr li main nav ol p pre section table td th tr ul title caption details summary".split()
)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping: list[str] = []
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self.skipping.append(tag)
        elif tag == "pre":
            self.pre += 1
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()
        elif tag == "pre" and self.pre:
            self.pre -= 1
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.pre:  # spaces kept through the line clean-up below as a private-use character
            self.parts.append(data.replace(" ", _PRE_SPACE).replace("\t", _PRE_TAB))
            return
        lead = " " if data[:1].isspace() else ""
        trail = " " if data[-1:].isspace() and data.strip() else ""
        self.parts.append(lead + " ".join(data.split()) + trail)


def html_text(html: str) -> str:
    """The visible text of an HTML page: no scripts or styles, block elements on their own lines."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (line.strip() for line in "".join(parser.parts).splitlines())
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip().replace(_PRE_SPACE, " ").replace(_PRE_TAB, "\t") + "\n"
