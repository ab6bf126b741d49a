"""Bytes to text: UTF-8 first, a byte-order mark where there is one, a detected encoding otherwise.

Runs in the REPL worker while it loads files. Standard library only, except `charset_normalizer`,
imported lazily when a file is neither UTF-8 nor obviously cp1252.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

SNIFF_BYTES = 8192
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Control bytes that plain text does not contain (tab, newlines, form feed and escape are allowed).
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))
_SINGLE_BYTE_FAMILIES = ("cp1", "cp7", "cp8", "iso8859", "latin", "mac", "koi8", "kz1048", "ptcp", "tis")


@dataclass(frozen=True)
class Decoded:
    """The text of a file, or why there is none (`skip`: "binary" | "undecodable")."""

    text: str | None
    encoding: str = "utf-8"
    note: str | None = None  # e.g. "decoded as cp1252", "3 invalid bytes replaced"
    skip: str | None = None


def looks_binary(head: bytes) -> bool:
    """True for data that is not text: NUL bytes, or many control bytes, in the first few KiB."""
    if not head or head.startswith(tuple(bom for bom, _ in _BOMS)):
        return False
    if b"\x00" in head:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL))
    return controls > len(head) // 10


def decode_bytes(data: bytes) -> Decoded:
    """Decode a file's bytes; never raises. Binary data and data no encoding fits give `skip`."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _replaced(data[len(bom) :], encoding)
    if looks_binary(data[:SNIFF_BYTES]):
        return Decoded(None, skip="binary")
    try:
        return Decoded(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    good_multibyte = len(text) - len(text.encode("ascii", "ignore")) - bad
    if good_multibyte >= bad and bad <= max(1, len(text) // 100):
        return Decoded(text, "utf-8", f"{bad} invalid UTF-8 byte sequence(s) replaced")
    detected = _detect(data)
    if detected is not None and not detected.startswith(_SINGLE_BYTE_FAMILIES):
        return _replaced(data, detected, note=f"decoded as {detected}")  # e.g. cp932, gb18030, big5
    try:
        return Decoded(data.decode("cp1252"), "cp1252", "decoded as cp1252")
    except UnicodeDecodeError:
        pass
    if detected is not None:
        return _replaced(data, detected, note=f"decoded as {detected}")
    return Decoded(None, skip="undecodable")


def _replaced(data: bytes, encoding: str, note: str | None = None) -> Decoded:
    text = data.decode(encoding, "replace")
    bad = text.count("\ufffd")
    if bad:
        extra = f"{bad} invalid byte sequence(s) replaced"
        note = f"{note}; {extra}" if note else extra
    return Decoded(text, encoding, note)


def _detect(data: bytes) -> str | None:
    """The encoding `charset_normalizer` finds most plausible, or None (also when it is not installed)."""
    try:
        import charset_normalizer
    except ImportError:
        return None
    best = charset_normalizer.from_bytes(data[: 1 << 20]).best()
    return None if best is None else str(best.encoding)
