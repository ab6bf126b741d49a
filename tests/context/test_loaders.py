"""Loaders: every input kind and every kind of bad file, through the same code the worker runs."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from rlmx.context import Context
from rlmx.context.decode import decode_bytes, looks_binary
from rlmx.context.formats import html_text, read_file
from rlmx.context.metadata import render
from rlmx.context.payload import load_payload
from rlmx.errors import ConfigError


def make_pdf(pages: list[str]) -> bytes:
    """A small valid PDF with one text line per input line (Helvetica), built by hand."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    page_ids = [4 + 2 * i for i in range(len(pages))]
    kids = b" ".join(b"%d 0 R" % p for p in page_ids)
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(pages))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for page_id, text in zip(page_ids, pages, strict=True):
        shown = b" ".join(b"(" + line.encode("latin-1") + b") Tj T*" for line in text.split("\n"))
        stream = b"BT /F1 12 Tf 72 720 Td 14 TL " + shown + b" ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_id + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def loaded(context: Context) -> tuple[object, dict]:
    """What the worker builds from this context's payload: (value, stats)."""
    result = load_payload(context.payload())
    return result.value, result.stats


# --- decoding ---------------------------------------------------------------------------------------


def test_decode_utf8_bom_and_utf16() -> None:
    assert decode_bytes("naïve café".encode()).text == "naïve café"
    assert decode_bytes(b"\xef\xbb\xbfhello").text == "hello"
    utf16 = decode_bytes("héllo wörld\n".encode("utf-16"))  # with its BOM; full of NUL bytes
    assert utf16.text == "héllo wörld\n" and utf16.skip is None


def test_decode_cp1252_and_broken_utf8() -> None:
    latin = decode_bytes("Le garçon était très fâché — 5 €.".encode("cp1252"))
    assert latin.text == "Le garçon était très fâché — 5 €." and latin.note == "decoded as cp1252"
    broken = decode_bytes(("Résumé of a naïve café. " * 20).encode() + b"\xff\xfe tail")
    assert broken.text is not None and broken.text.startswith("Résumé of a naïve café.")
    assert "\ufffd" in broken.text and broken.note is not None and "replaced" in broken.note


def test_decode_binary_and_undecodable() -> None:
    assert looks_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR") and decode_bytes(b"ab\x00cd").skip == "binary"
    noise = bytes(
        (i * 97 + 13) % 256 for i in range(9000) if (i * 97 + 13) % 256 >= 32
    )  # no NUL, no controls
    noise += bytes([0x81, 0x8D, 0x8F, 0x90, 0x9D]) * 50  # bytes cp1252 leaves undefined
    assert decode_bytes(noise).skip == "undecodable"  # no encoding fits: left out, not taken as text


# --- single files -------------------------------------------------------------------------------------


def test_one_text_file_is_a_str(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("line one\nline two\n")
    value, stats = loaded(Context.from_paths(path))
    assert value == "line one\nline two\n"
    assert stats["kind"] == "str" and stats["chars"] == 18 and stats["lines"] == 2


def test_jsonl_and_csv_become_records(tmp_path: Path) -> None:
    jsonl = tmp_path / "tickets.jsonl"
    jsonl.write_text('{"id": 1, "text": "a"}\n\n{"id": 2, "text": "b"}\nnot json\n[1, 2]\n')
    value, stats = loaded(Context.from_paths(jsonl))
    assert value == [{"id": 1, "text": "a"}, {"id": 2, "text": "b"}, [1, 2]]
    assert stats["kind"] == "list" and "1 line(s) that are not JSON" in render(stats)
    csv_path = tmp_path / "people.csv"
    csv_path.write_text('name,age,city\nAda,36,London\n"Lovelace, A",37,"New ""York"""\n')
    value, _ = loaded(Context.from_paths(csv_path))
    assert value == [
        {"name": "Ada", "age": "36", "city": "London"},
        {"name": "Lovelace, A", "age": "37", "city": 'New "York"'},
    ]
    tsv = tmp_path / "t.tsv"
    tsv.write_text("a\tb\n1\t2\n")
    assert loaded(Context.from_paths(tsv))[0] == [{"a": "1", "b": "2"}]


def test_json_file_gives_its_value_or_text_when_invalid(tmp_path: Path) -> None:
    good = tmp_path / "config.json"
    good.write_text(json.dumps({"users": [1, 2], "name": "x"}))
    assert loaded(Context.from_paths(good))[0] == {"users": [1, 2], "name": "x"}
    bad = tmp_path / "bad.json"
    bad.write_text('{"users": [1, 2,')
    value, stats = loaded(Context.from_paths(bad))
    assert value == '{"users": [1, 2,' and "not valid JSON" in render(stats)


def test_pdf_text_by_page_and_broken_pdf(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(make_pdf(["Quarterly report\nRevenue grew 12 percent", "Page two says goodbye"]))
    value, _ = loaded(Context.from_paths(pdf))
    assert isinstance(value, str)
    first, second = value.split("\f\n")
    assert "Quarterly report" in first and "Revenue grew 12 percent" in first
    assert "Page two says goodbye" in second
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(make_pdf(["hello"])[:120])  # cut short: no xref, no trailer
    read = read_file(str(broken), "pdf")
    assert read.text is None and read.skip is not None and read.skip.startswith("broken PDF")
    garbage = tmp_path / "garbage.pdf"
    garbage.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 4)
    assert (read_file(str(garbage), "pdf").skip or "").startswith("broken PDF")


def test_html_text_drops_scripts_and_keeps_blocks() -> None:
    html = (
        "<html><head><title>Status page</title><style>p {color: red}</style></head><body>"
        "<h1>All   systems</h1><p>Database is <b>up</b> &amp; fast.</p><script>var x = 'hidden';</script>"
        "<ul><li>api: ok</li><li>queue: degraded</li></ul><pre>  keep\n    spacing</pre></body></html>"
    )
    text = html_text(html)
    lines = [line for line in text.splitlines() if line]
    assert lines[:5] == ["Status page", "All systems", "Database is up & fast.", "api: ok", "queue: degraded"]
    assert "hidden" not in text and "color" not in text
    assert "keep\n    spacing" in text


def test_single_bad_file_gives_no_context_and_says_why(tmp_path: Path) -> None:
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    value, stats = loaded(Context.from_paths(image))
    assert value is None
    assert "Left out 1 file (1 binary)" in render(stats) and "photo.png: binary" in render(stats)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert loaded(Context.from_paths(empty))[0] == ""


# --- folders and many files ---------------------------------------------------------------------------


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "logs").mkdir(parents=True)
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "logs" / "app.log").write_text("INFO start\nERROR disk full\n")
    (root / "logs" / "old.log").write_text("INFO ancient\n")
    (root / "docs" / "readme.md").write_text("# Readme\nhello\n")
    (root / "docs" / "deep" / "page.html").write_text("<p>Deep <i>page</i></p>")
    (root / "docs" / "report.pdf").write_bytes(make_pdf(["pdf body text"]))
    (root / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf at all\n")
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"))
    (root / "bad-utf8.txt").write_bytes(("ünïcödé text " * 30).encode() + b"\xc3\x28 end\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (root / "empty.txt").write_text("")
    (root / "records.jsonl").write_text('{"a": 1}\n')
    (root / ".hidden.txt").write_text("secret\n")
    (root / "dangling.txt").symlink_to(root / "missing-target")
    (root / "kernel-memory").symlink_to("/proc/self/mem")  # points out of the folder: not followed
    (root / "logs" / "alias.log").symlink_to(root / "logs" / "app.log")  # inside: followed
    os.mkfifo(root / "pipe")
    (root / ".gitignore").write_text("old.log\n*.tmp\n")
    (root / "scratch.tmp").write_text("ignored by .gitignore\n")
    return root


def test_folder_documents_and_every_bad_file_noted(folder: Path) -> None:
    value, stats = loaded(Context.from_paths(folder))
    assert isinstance(value, list)
    paths = [d["path"] for d in value]
    assert paths == [
        "bad-utf8.txt",
        "docs/deep/page.html",
        "docs/readme.md",
        "docs/report.pdf",
        "latin1.txt",
        "logs/alias.log",
        "logs/app.log",
        "records.jsonl",
    ]
    docs = {d["path"]: d["text"] for d in value}
    assert docs["latin1.txt"] == "café crème brûlée\n"
    assert docs["docs/deep/page.html"].strip() == "Deep page"
    assert "pdf body text" in docs["docs/report.pdf"]
    assert docs["records.jsonl"] == '{"a": 1}\n'  # in a folder, JSONL stays a document
    assert "\ufffd" in docs["bad-utf8.txt"]
    skipped = stats["skipped"]
    assert skipped["count"] == 6
    assert skipped["by_reason"] == {
        "binary": 1,
        "broken symlink": 1,
        "broken PDF": 1,
        "empty": 1,
        "symlink out of the folder": 1,
        "not a regular file": 1,
    }
    text = render(stats)
    assert "Left out 6 files" in text and "Notes on 2 files" in text
    assert "secret" not in text and "ERROR disk full" not in text  # never the content


def test_gitignore_include_exclude_and_hidden(folder: Path) -> None:
    def names(**kw: object) -> list[str]:
        context = Context.from_paths(folder, **kw)  # type: ignore[arg-type]
        assert context.manifest is not None
        return [f.name for f in context.manifest.files]

    default = names()
    assert "logs/old.log" not in default and "scratch.tmp" not in default and ".hidden.txt" not in default
    assert "logs/old.log" in names(gitignore=False) and "scratch.tmp" in names(gitignore=False)
    assert ".hidden.txt" in names(hidden=True) and ".gitignore" in names(hidden=True)
    assert names(include=["*.log", "*.md"]) == ["docs/readme.md", "logs/alias.log", "logs/app.log"]
    assert names(include=["docs/"]) == [
        "docs/broken.pdf",
        "docs/deep/page.html",
        "docs/readme.md",
        "docs/report.pdf",
    ]
    assert not any(n.startswith("docs/") for n in names(exclude=["docs/"]))
    assert names(include=["*.txt"], exclude=["latin*"]) == ["bad-utf8.txt"]
    # empty.txt matches too, but the scan's sniff leaves it out (as the worker would), with its reason
    selected = Context.from_paths(folder, include=["*.txt"], exclude=["latin*"]).manifest
    assert selected is not None and ("empty.txt", "empty") in selected.skipped


def test_nested_and_repository_gitignore(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "src" / "build").mkdir(parents=True)
    (repo / "src" / "main.py").write_text("print(1)\n")
    (repo / "src" / "debug.log").write_text("noise\n")
    (repo / "src" / "keep.log").write_text("kept\n")
    (repo / "src" / "build" / "out.txt").write_text("artefact\n")
    (repo / "src" / ".gitignore").write_text("!keep.log\n")
    context = Context.from_paths(repo / "src")  # the repository root's .gitignore applies too
    assert context.manifest is not None
    assert [f.name for f in context.manifest.files] == ["keep.log", "main.py"]


def test_many_inputs_stdin_and_pipes(tmp_path: Path, folder: Path) -> None:
    single = tmp_path / "one.txt"
    single.write_text("first file\n")
    context = Context.from_paths([str(single), str(folder / "logs"), "-"], stdin=io.StringIO("from stdin\n"))
    value, stats = loaded(context)
    assert isinstance(value, list)
    # data/.gitignore is not in a repository: it applies only to a walk that starts in data/
    assert [d["path"] for d in value] == [
        "<stdin>",
        str(single),
        "logs/alias.log",
        "logs/app.log",
        "logs/old.log",
    ]
    assert value[0]["text"] == "from stdin\n" and value[2]["text"] == value[3]["text"]
    assert stats["kind"] == "documents" and stats["count"] == 5
    alone = Context.from_paths("-", stdin=io.StringIO("just stdin"))
    assert not alone.is_files and alone.load() == "just stdin"
    with pytest.raises(ConfigError, match="only once"):
        Context.from_paths(["-", "-"], stdin=io.StringIO("x"))
    read_fd, write_fd = os.pipe()  # a pipe named directly (like <(cmd)) is read by the host
    os.write(write_fd, b"piped text\n")
    os.close(write_fd)
    try:
        piped = Context.from_paths(f"/dev/fd/{read_fd}")
    finally:
        os.close(read_fd)
    assert piped.load() == "piped text\n"


def test_missing_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"context path not found: .*nope"):
        Context.from_paths(tmp_path / "nope")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="broken symlink"):
        Context.from_paths(tmp_path / "link")


def test_unreadable_file_given_directly() -> None:
    value, stats = loaded(Context.from_paths("/proc/self/mem"))  # a regular file no read succeeds on
    assert value is None
    assert stats["skipped"]["examples"] == ["/proc/self/mem: unreadable (Input/output error)"]


def test_file_removed_after_the_scan_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("stays\n")
    (tmp_path / "b.txt").write_text("goes\n")
    context = Context.from_paths(tmp_path)
    (tmp_path / "b.txt").unlink()  # between the host's scan and the worker's read
    value, stats = loaded(context)
    assert value == [{"path": "a.txt", "text": "stays\n"}]
    assert stats["skipped"]["examples"] == ["b.txt: unreadable (No such file or directory)"]


def test_host_scan_metadata_is_bounded_and_says_bytes(folder: Path) -> None:
    context = Context.from_paths(folder)
    text = context.describe()
    assert "documents" in text and "bytes on disk" in text
    assert context.load() == load_payload(context.payload()).value  # in-process load == worker load


def test_inline_values_and_pathlib(tmp_path: Path) -> None:
    assert Context.of("text").load() == "text"
    assert Context.of({"a": 1}).payload().kind == "inline-json"
    assert Context.of(None).payload().kind == "none"
    (tmp_path / "x.txt").write_text("from a Path")
    assert Context.of(tmp_path / "x.txt").load() == "from a Path"
    assert Context.of([tmp_path / "x.txt"]).payload().kind == "files"
    same = Context.of("y")
    assert Context.of(same) is same


def test_size_summary_gives_min_median_p90_max() -> None:
    from rlmx.context.metadata import size_summary

    assert size_summary([]) == []
    assert size_summary([5]) == [5, 5, 5, 5]
    # an even count: the lower-rounded mean of the middle two
    assert size_summary([4, 1, 3, 2]) == [1, 2, 4, 4]
    assert size_summary(list(range(1, 12))) == [1, 6, 10, 11]
