"""Context at scale: a 10M-token folder, loaded once and shared. Prints measured figures beside targets.

    .venv/bin/python benchmarks/context_scale.py [--dir /tmp/rlmx-bench-context] [--quick]

Sections (one run, a few minutes on two cores):
  memory  a depth-3 run (root -> child -> grandchild, each with its own REPL over the same files):
          PSS summed over the whole process tree (host, zygote, workers) from /proc/PID/smaps_rollup
  load    scan + read + view in one process, and through the sandbox (run start to the first model call)
  prompt  root prompt tokens (system + first user message, exact cl100k) for 8K .. 10M token contexts
  grep    helpers.grep over the text view vs plain `re.finditer` over the same text, same process
  peek    peek at the start, middle and end of a 40 MB view vs a 400 KB one
  bm25    search index build (cold), load from the disk cache, and query times
  unicode what non-ASCII text costs in memory (CPython stores a str at 1, 2 or 4 bytes a character)

Not part of the test suite: nothing here asserts. The corpus is generated once (English-like words from
the standard library's docstrings, log lines with numbers) and kept in --dir for later runs.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

MB = 1 << 20
FILES = 2_000
FOLDERS = 20
TARGET_BYTES = 40 * MB
NEEDLE = "ERROR quota exceeded for tenant"


# ----------------------------------------------------------------------------------------- corpus


def vocabulary() -> tuple[list[str], list[int]]:
    counts: Counter[str] = Counter()
    word = re.compile(r"\b[a-z]{2,14}\b")
    root = sysconfig.get_paths()["stdlib"]
    for folder, _, names in os.walk(root):
        if "test" in folder or "site-packages" in folder:
            continue
        for name in names:
            if name.endswith(".py"):
                text = Path(folder, name).read_text(encoding="utf-8", errors="replace")
                for m in re.finditer(r'"""(.*?)"""|#(.*)', text, re.S):
                    counts.update(word.findall((m.group(1) or m.group(2) or "").lower()))
    common = counts.most_common(30_000)
    return [w for w, _ in common], [n for _, n in common]


def generate(root: Path, total_bytes: int) -> None:
    """FILES files of log lines and prose in FOLDERS folders; a few needles for grep and search."""
    rng = random.Random(0)
    words, weights = vocabulary()
    per_file = total_bytes // FILES
    levels = ["INFO"] * 20 + ["DEBUG"] * 6 + ["WARN"] * 3 + ["ERROR"]
    for i in range(FILES):
        folder = root / f"svc-{i % FOLDERS:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        stream = iter(rng.choices(words, weights, k=per_file // 4))
        lines: list[str] = []
        size = 0
        prose = i % 5 == 4
        while size < per_file:
            n = rng.randint(6, 22)
            sentence = " ".join(next(stream, "data") for _ in range(n))
            if prose:
                line = sentence.capitalize() + "."
            else:
                stamp = f"2025-{1 + i % 12:02d}-{1 + (size // 997) % 28:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}"
                line = f"{stamp} {rng.choice(levels)} [worker-{rng.randrange(64)}] req={rng.randrange(10**6)} {sentence}"
            lines.append(line)
            size += len(line) + 1
        if i % 97 == 13:
            lines.insert(len(lines) // 2, f"2025-06-01T00:00 {NEEDLE} t-{i:05d} after {i * 7} retries")
        name = f"day-{i:05d}.md" if prose else f"day-{i:05d}.log"
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / ".complete").write_text(str(total_bytes))


def widened(root: Path, char: str) -> Path:
    """A copy of the corpus where every file holds one `char` (so each str is 2 or 4 bytes a character)."""
    target = root.parent / f"{root.name}-u{ord(char):x}"
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(root, target, ignore=shutil.ignore_patterns(".complete"))
        for path in target.rglob("day-*"):
            with path.open("a", encoding="utf-8") as f:
                f.write(f"note: price in {char}\n")
        (target / ".complete").write_text(char)
    return target


def corpus(root: Path, total_bytes: int) -> Path:
    if not (root / ".complete").exists() or (root / ".complete").read_text() != str(total_bytes):
        print(f"generating a {total_bytes / MB:.0f} MB corpus in {root} (once) ...", flush=True)
        t0 = time.monotonic()
        # in a child process: the generator's garbage must not inflate this process's memory figures
        subprocess.run([sys.executable, __file__, "--generate", str(root), str(total_bytes)], check=True)
        print(f"  done in {time.monotonic() - t0:.0f} s", flush=True)
    return root


# ----------------------------------------------------------------------------------------- memory


def pss_tree(pid: int) -> tuple[int, int]:
    """(PSS summed over pid and all its descendants in bytes, number of processes)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    total, count, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        match = re.search(r"^Pss:\s+(\d+) kB", rollup, re.M)
        if match:
            total += int(match.group(1)) * 1024
            count += 1
    return total, count


def depth3_memory(root: Path) -> dict[str, Any]:
    from rlmx import RLM, Limits
    from rlmx.context import Context
    from rlmx.testing import FunctionLM

    found: dict[str, Any] = {}
    started = time.monotonic()

    def model(messages: list[dict[str, Any]], settings: Any) -> str:
        if settings.purpose not in ("root", "child_root", "correction", "final"):  # a sub-call
            return "sub"
        user = str(messages[1]["content"])
        turns = sum(1 for m in messages if m["role"] == "assistant")
        if "first_call_s" not in found:
            found["first_call_s"] = time.monotonic() - started
            found["meta"] = user
        if settings.depth == 2:  # the grandchild, asked "level three"
            if turns == 0:
                return "```repl\nhits = grep('quota exceeded')\nprint(len(hits), len(context))\n```"
            found["pss"], found["procs"] = pss_tree(os.getpid())
            found["grandchild_output"] = str(messages[-1]["content"])
            return "FINAL(bottom)"
        if settings.depth == 1:  # the child, asked "level two"
            return "```repl\nr = rlm_query('level three')\n```" if turns == 0 else "FINAL_VAR(r)"
        return "```repl\nr = rlm_query('level two')\n```" if turns == 0 else "FINAL_VAR(r)"

    rlm = RLM(FunctionLM(model), trace=False, limits=Limits(max_depth=3))
    result = rlm.run("level one", Context.from_paths(root))
    found["stopped_by"] = result.stopped_by
    found["error"] = result.error
    return found


# ----------------------------------------------------------------------------------------- prompt


def subset(root: Path, files: list[Path], chars: int) -> Path:
    """A folder of about `chars` characters of the corpus: hard links to whole files, the last one cut."""
    target = root.parent / f"{root.name}-subset-{chars}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    left = chars
    for path in files:
        if left <= 0:
            break
        dest = target / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        size = path.stat().st_size
        if size <= left:
            os.link(path, dest)
        else:
            dest.write_text(path.read_text(encoding="utf-8")[:left], encoding="utf-8")
        left -= size
    (target / ".complete").write_text(str(chars))
    return target


def prompt_tokens(folder: Path) -> tuple[int, int]:
    """(exact tokens of the root's first request: system + user, estimated context tokens)."""
    from rlmx import RLM
    from rlmx.context import Context
    from rlmx.repl.tokens import count_tokens
    from rlmx.testing import FunctionLM

    seen: dict[str, int] = {}

    def model(messages: list[dict[str, Any]], settings: Any) -> str:
        if "prompt" not in seen:
            seen["prompt"] = sum(count_tokens(str(m["content"])) for m in messages)
            match = re.search(r"about ([\d,]+) tokens", str(messages[1]["content"]))
            seen["context"] = int(match.group(1).replace(",", "")) if match else 0
        return "FINAL(done)"

    RLM(FunctionLM(model), trace=False).run(
        "How many quota errors were logged, by tenant?", Context.from_paths(folder)
    )
    return seen["prompt"], seen["context"]


# ----------------------------------------------------------------------------------------- in-process


def timed(fn: Any, repeat: int = 3) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def rss() -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def row(name: str, measured: str, target: str = "", ok: bool | None = None) -> None:
    mark = "" if ok is None else ("ok" if ok else "MISSED")
    print(f"  {name:<48} {measured:>26}   {target:<22} {mark}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "rlmx-bench-context"))
    parser.add_argument("--quick", action="store_true", help="a 4 MB corpus, to try the script out")
    parser.add_argument("--generate", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(Path(args.generate[0]), int(args.generate[1]))
        return
    total = TARGET_BYTES // 10 if args.quick else TARGET_BYTES
    root = corpus(Path(args.dir) / ("quick" if args.quick else "full"), total)
    os.environ.setdefault("XDG_CACHE_HOME", os.path.join(args.dir, "cache"))
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    text_bytes = sum(p.stat().st_size for p in files)
    print(
        f"corpus: {len(files):,} files in {FOLDERS} folders, {text_bytes / MB:.1f} MB of ASCII text\n",
        flush=True,
    )

    print("memory and load through the sandbox (depth-3 run, FunctionLM)")
    mem = depth3_memory(root)
    budget = 2 * text_bytes + 300 * MB
    row("run ended by", str(mem["stopped_by"]), "final", mem["stopped_by"] == "final")
    row("grandchild saw", " ".join(mem["grandchild_output"].split()[-2:]), "needles, documents")
    row(
        "PSS of the process tree at depth 2",
        f"{mem['pss'] / MB:,.0f} MB ({mem['procs']} procs)",
        f"<= {budget / MB:,.0f} MB",
        mem["pss"] <= budget,
    )
    row("  as a multiple of the text size", f"{mem['pss'] / text_bytes:.2f} x", "<= 2 x + 300 MB")
    row(
        "run start -> first model call (load, zygote)",
        f"{mem['first_call_s']:.2f} s",
        "<= 2 s",
        mem["first_call_s"] <= 2,
    )

    print("\nthe same depth-3 run where every file holds one non-ASCII character")
    for char, label in (
        ("€", "one € per file (2 bytes a character)"),
        ("😀", "one emoji per file (4 bytes)"),
    ):
        wide = depth3_memory(widened(root, char))
        row(
            label,
            f"{wide['pss'] / MB:,.0f} MB ({wide['pss'] / text_bytes:.2f} x)",
            f"<= {budget / MB:,.0f} MB",
            wide["pss"] <= budget,
        )

    from rlmx.context import Context
    from rlmx.context.payload import load_payload
    from rlmx.repl.helpers import TextView, grep, peek
    from rlmx.repl.search import SearchIndex
    from rlmx.repl.tokens import count_tokens

    print("\nroot prompt tokens by context size (exact cl100k; flat = within 10% of the 8K one)")
    base = None
    for target in (8_000, 100_000, 1_000_000, 10_000_000):
        folder = root if target * 4 >= text_bytes else subset(root, files, target * 4)
        tokens, ctx_tokens = prompt_tokens(folder)
        base = base or tokens
        row(
            f"context of about {ctx_tokens:,} tokens",
            f"{tokens:,} tokens",
            f"{tokens / base:.3f} x the 8K one",
            abs(tokens / base - 1) <= 0.10,
        )

    print("\nload in one process (scan + read + view + line index)")
    t0 = time.perf_counter()
    context = Context.from_paths(root)
    scan_s = time.perf_counter() - t0
    loaded = load_payload(context.payload())
    load_s = time.perf_counter() - t0
    view = TextView(loaded.value)
    view.build_line_index()
    view_s = time.perf_counter() - t0
    text = view.text
    exact_tokens = count_tokens(text)
    count_s = time.perf_counter() - t0 - view_s
    row("scan (names, stat, .gitignore)", f"{scan_s:.3f} s")
    row("scan + read + decode 2,000 files", f"{load_s:.3f} s", "<= 2 s", load_s <= 2)
    row("... + text view + line index", f"{view_s:.3f} s", "<= 2 s", view_s <= 2)
    row("exact token count (cl100k, offline)", f"{exact_tokens:,} in {count_s:.2f} s", "about 10M tokens")

    print("\ngrep vs plain re over the same text (same process, alternated, best of 7)")
    for pattern in (NEEDLE, r"tenant t-0\d+3", r"\bERROR\b.*\bretries\b", r"worker-63\] req=99\d{4}"):
        rx = re.compile(pattern, re.M)
        re_s = grep_s = float("inf")
        for _ in range(7):  # alternated, best of each: the machine's other load hits both alike
            t0 = time.perf_counter()
            _ = [m.start() for m in rx.finditer(text)]
            re_s = min(re_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            hits = grep(view, pattern, max_matches=10**9)
            grep_s = min(grep_s, time.perf_counter() - t0)
        row(
            f"{pattern[:40]!r} ({len(hits)} lines)",
            f"{grep_s * 1000:.0f} ms vs {re_s * 1000:.0f} ms",
            f"{grep_s / re_s:.2f} x (<= 1.3 x)",
            grep_s <= 1.3 * re_s,
        )

    print("\npeek (constant time: the same at any offset and any context size)")
    small = TextView(text[:400_000])
    big = f"{len(text) / MB:.0f} MB view"
    for label, v, offset in (
        (f"{big}, start", view, 0),
        (f"{big}, middle", view, len(text) // 2),
        (f"{big}, end", view, -2000),
        ("400 KB view, middle", small, 200_000),
    ):
        s, _ = timed(lambda v=v, offset=offset: [peek(v, offset, 2000) for _ in range(1000)])
        row(label, f"{s * 1000:.2f} us per call")

    print("\nBM25 search (bm25s over ~1,200-character chunks)")
    cache = tempfile.mkdtemp(prefix="rlmx-bench-bm25-")
    before = rss()
    index = SearchIndex(view, cache_dir=cache)
    t0 = time.perf_counter()
    first = index.search("quota exceeded for tenant retries", k=10)
    build_s = time.perf_counter() - t0
    grown = rss() - before
    row("chunks", f"{len(index.spans()[0]):,}")
    row("first search: chunk + tokenize + index + save", f"{build_s:.2f} s")
    row("memory kept by the index (RSS growth)", f"{grown / MB:.0f} MB")
    again = SearchIndex(view, cache_dir=cache)
    t0 = time.perf_counter()
    again.search("quota exceeded for tenant retries", k=10)
    cached_s = time.perf_counter() - t0
    row(
        "first search in a new REPL (disk cache)",
        f"{cached_s:.2f} s",
        "cached" if again.loaded_from_cache else "",
    )
    query_s, _ = timed(lambda: index.search("worker request timeout retries", k=10), repeat=5)
    row("query (index in memory)", f"{query_s * 1000:.1f} ms")
    needle_hits = sum(1 for h in first if "quota exceeded" in h.text)
    row("needle chunks among the top 10", f"{needle_hits} of 10")

    print("\nnon-ASCII text (CPython keeps a str at 1, 2 or 4 bytes per character, by its widest one)")
    n = len(text)
    for label, extra in (
        ("ASCII / Latin-1 only", "é"),
        ("one BMP character (e.g. €, 日)", "€"),
        ("one emoji", "😀"),
    ):
        size = sys.getsizeof(text[: n // 4] + extra) * 4
        row(
            label, f"{size / MB:,.0f} MB per copy of the text", f"{size / text_bytes:.1f} x the bytes on disk"
        )
    print(
        "  a document's width applies to its own str; the text view (one joined str) takes the widest of all."
    )


if __name__ == "__main__":
    main()
