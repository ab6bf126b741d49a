"""rlmx's DSPy interpreter beside DSPy's own sandbox (Deno + Pyodide), side by side in one run.

    .venv/bin/python benchmarks/peers/setup.py dspy      # benchmarks/.venvs/dspy: dspy[deno]==3.4.1
    .venv/bin/python benchmarks/dspy_interpreter.py      # medians of 3 driver runs each
    .venv/bin/python benchmarks/dspy_interpreter.py --repeats 5 --json results/dspy_interpreter.json

Both interpreters (and DSPy's LocalInterpreter, a plain subprocess it documents as no sandbox, for
reference) run in driver processes of the same Python (the DSPy environment's, with rlmx's source
on PYTHONPATH), one driver per interpreter and repeat, alternating. Each driver measures: start-up (a
new interpreter to its first result; the first in the process, and later ones), one execute (a line of
code), one tool call, a 40 MB string variable (its first execute, and the same variable again), and this
run's peak PSS over the driver's whole process tree (host, zygote and worker, or Deno) sampled every
20 ms. Figures are medians over the repeats.

Deno fetches two modules at its first start: Pyodide from the npm registry, and a line reader from
deno.land. Where deno.land is out of reach (this machine's sandbox), the benchmark maps that one import
to a reader of its own (`--import-map`, the same `readLines` contract); Pyodide and DSPy's runner are
unchanged. Without Deno the table shows rlmx alone and says why.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measure import TreeSampler  # noqa: E402

DSPY_PYTHON = ROOT / "benchmarks" / ".venvs" / "dspy" / "bin" / "python"
KINDS = ("rlmx", "deno", "local")  # local: DSPy's LocalInterpreter, a plain subprocess (no sandbox)
VAR_CHARS = 40 * 1024 * 1024

LINE_READER = """\
export async function* readLines(reader: { read(p: Uint8Array): Promise<number | null> }) {
  const decoder = new TextDecoder();
  const chunk = new Uint8Array(1 << 16);
  let buffer = "";
  let from = 0;
  for (;;) {
    const n = await reader.read(chunk);
    if (n === null) break;
    buffer += decoder.decode(chunk.subarray(0, n), { stream: true });
    let at;
    while ((at = buffer.indexOf("\\n", from)) >= 0) {
      yield buffer.slice(0, at).replace(/\\r$/, "");
      buffer = buffer.slice(at + 1);
      from = 0;
    }
    from = buffer.length;
  }
  buffer += decoder.decode();
  if (buffer.length) yield buffer;
}
"""


# --- the driver: one interpreter kind, in its own process ------------------------------------------


def deno_factory() -> Any:
    """DSPy's PythonInterpreter, with deno.land's line reader mapped to a local one where unreachable."""
    from dspy.primitives.python_interpreter import PythonInterpreter

    if os.environ.get("RLMX_BENCH_DENO_NATIVE"):
        return PythonInterpreter
    default = PythonInterpreter()
    command = list(default.deno_command)
    folder = Path(tempfile.mkdtemp(prefix="dspy-deno-"))
    (folder / "std_io.ts").write_text(LINE_READER)
    mapped = {"imports": {"https://deno.land/std@0.186.0/io/mod.ts": (folder / "std_io.ts").as_uri()}}
    (folder / "map.json").write_text(json.dumps(mapped))
    runner = next(i for i, arg in enumerate(command) if arg.endswith("runner.js"))
    reads = next(i for i, arg in enumerate(command) if arg.startswith("--allow-read="))
    command[reads] += f",{folder}"
    command.insert(runner, f"--import-map={folder / 'map.json'}")
    return lambda **kw: PythonInterpreter(deno_command=command, **kw)


def drive(kind: str) -> dict[str, Any]:
    if kind == "rlmx":
        from rlmx.integrations.dspy import Interpreter as make
    elif kind == "local":
        from dspy.primitives.local_interpreter import LocalInterpreter as make
    else:
        make = deno_factory()

    def echo(value: int) -> int:
        return value

    def start() -> tuple[Any, float]:
        t0 = time.perf_counter()
        interpreter = make(tools={"echo": echo})
        assert interpreter.execute("1 + 1") == 2
        return interpreter, time.perf_counter() - t0

    out: dict[str, Any] = {}
    first, out["start_first_s"] = start()
    later = []
    for _ in range(3):
        other, seconds = start()
        later.append(seconds)
        other.shutdown()
    out["start_later_s"] = statistics.median(later)
    first.execute("x = 0")
    out["execute_ms"] = 1000 * _median_time(lambda: first.execute("x = x + 1"), 200)
    out["tool_ms"] = 1000 * _median_time(lambda: first.execute("y = echo(x)"), 100)
    doc = "".join(f"{i:09d} lorem ipsum dolor sit amet\n" for i in range(VAR_CHARS // 36 + 1))[:VAR_CHARS]
    t0 = time.perf_counter()
    assert first.execute("len(doc)", {"doc": doc}) == len(doc)
    out["var40_first_s"] = time.perf_counter() - t0
    out["var40_again_s"] = _median_time(lambda: first.execute("len(doc)", {"doc": doc}), 3)
    first.shutdown()
    return out


def _median_time(call: Any, times: int) -> float:
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


# --- the parent: drivers side by side, peak PSS of each --------------------------------------------


def python_for_drivers() -> Path:
    if DSPY_PYTHON.exists():
        return DSPY_PYTHON
    raise SystemExit(
        f"no DSPy environment at {DSPY_PYTHON}; create it with: python benchmarks/peers/setup.py dspy"
    )


def run_driver(python: Path, kind: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [str(python), str(Path(__file__).resolve()), "--driver", kind]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(process.pid) as sampler:
        stdout, stderr = process.communicate(timeout=900)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if process.returncode != 0 or not lines:
        return {"error": (stderr.strip().splitlines() or ["no output"])[-1][:300]}
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    result["peak_pss_mb"] = sampler.peak_kb / 1024
    return result


FIGURES = [
    ("start_first_s", "start-up, first interpreter (s)"),
    ("start_later_s", "start-up, a later one (s)"),
    ("execute_ms", "one execute (ms)"),
    ("tool_ms", "one execute with a tool call (ms)"),
    ("var40_first_s", "40 MB variable, first execute (s)"),
    ("var40_again_s", "40 MB variable, the same str again (s)"),
    ("peak_pss_mb", "peak PSS of the process tree (MB)"),
]


def table(medians: dict[str, dict[str, float]], errors: dict[str, str]) -> str:
    rows = [
        "| figure | rlmx | DSPy Deno | Deno / rlmx | DSPy LocalInterpreter (no sandbox) |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, label in FIGURES:
        ours, theirs = medians.get("rlmx", {}).get(key), medians.get("deno", {}).get(key)
        local = medians.get("local", {}).get(key)
        ratio = f"{theirs / ours:.1f}x" if ours and theirs else "-"
        rows.append(f"| {label} | {_fmt(ours)} | {_fmt(theirs)} | {ratio} | {_fmt(local)} |")
    for kind, error in errors.items():
        rows.append(f"\n{kind} unavailable: {error}")
    return "\n".join(rows)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=KINDS)
    parser.add_argument("--json", type=Path, help="write the medians and every run here")
    parser.add_argument("--driver", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        print("RESULT " + json.dumps(drive(args.driver)), flush=True)
        return
    python = python_for_drivers()
    kinds = [args.only] if args.only else list(KINDS)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    errors: dict[str, str] = {}
    for repeat in range(args.repeats):
        for kind in kinds:
            if kind in errors:
                continue
            result = run_driver(python, kind)
            print(f"repeat {repeat + 1} {kind}: {json.dumps(result)}", flush=True)
            if "error" in result:
                errors[kind] = result["error"]
            else:
                runs[kind].append(result)
    medians = {
        kind: {key: statistics.median(r[key] for r in results) for key, _ in FIGURES}
        for kind, results in runs.items()
        if results
    }
    print(table(medians, errors))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"medians": medians, "runs": runs, "errors": errors}, indent=2))


if __name__ == "__main__":
    main()
