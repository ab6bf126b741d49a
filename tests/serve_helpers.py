"""Helpers for the serve / MCP tests: start `rlmx serve` as a real process (or its app under uvicorn in a
thread of the test process), find a REPL worker's host pid."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies import is_forced_final, is_rlm, last_user, question, repl, turn

TOKEN = "test-token-0123456789"
URL_LINE = re.compile(r"(?:listening on|streamable HTTP on) (http://\S+/(?:v1|mcp))")
BIG = "lorem ipsum dolor sit amet " * 800  # ~21,600 characters: beyond the 8,000-character threshold


@dataclass
class ServeProcess:
    proc: subprocess.Popen[str]
    url: str
    stderr: list[str] = field(default_factory=list)

    def log(self) -> str:
        return "".join(self.stderr)


@contextlib.contextmanager
def app_in_thread(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 in a thread of this process (so a test can hand it test
    doubles and read its log with caplog); yields the base URL (.../v1); stops it and joins the thread."""
    import uvicorn

    from rlmx.serve.server import bind

    sock = bind("127.0.0.1", 0)
    config = uvicorn.Config(app, lifespan="off", log_config=None, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), "uvicorn to start in its thread", 30)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
        assert not thread.is_alive(), "the uvicorn thread did not stop"


@contextlib.contextmanager
def rlmx_serve(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, command: list[str] | None = None
) -> Iterator[ServeProcess]:
    """`rlmx serve --port 0 ARGS` (or `command`) in a subprocess; yields once it prints its URL; stops it."""
    cmd = command or [sys.executable, "-m", "rlmx.cli", "serve", "--port", "0", *args]
    full_env = {**os.environ, "RLMX_SERVE_TOKEN": TOKEN, **(env or {})}
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=cwd,
    )
    lines: list[str] = []
    found: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = URL_LINE.search(line)
            if match:
                found.put(match.group(1))
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        url = found.get(timeout=120)
        if url is None:
            raise RuntimeError(f"rlmx serve exited with {proc.wait()}:\n{''.join(lines)}")
        yield ServeProcess(proc, url, lines)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def host_pid(ancestor: int, reported: int) -> int | None:
    """The host pid of the process below `ancestor` that sees itself as `reported` (PID namespaces too)."""
    for pid in descendants(ancestor):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^NSpid:\s*(.*)$", status, re.MULTILINE)
        ids = match.group(1).split() if match else [str(pid)]
        if ids and int(ids[-1]) == reported:
            return pid
    return None


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(condition: object, what: str, limit_s: float = 60.0) -> None:
    """Poll `condition()` until it holds; a generous cap so a hang fails instead of blocking the suite."""
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for: {what}")
        time.sleep(0.05)


class Router:
    """The scripted model: picks a script by the words of the question."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocked = threading.Event()
        self.pids: list[int] = []
        self.sleeping = threading.Event()

    def __call__(self, messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return f"sub:{len(messages[-1]['content'])}"
        if is_forced_final(request):
            return "FINAL(forced)"
        q, t = question(messages), turn(messages)
        if "say hello" in q:
            return "FINAL(hello from rlmx)"
        if "list the documents" in q:
            if t == 0:
                return repl(
                    "docs = context if isinstance(context, list) else [{'path': 'single', 'text': context}]\n"
                    "sizes = {d['path']: len(d['text']) for d in docs}\nprint(sizes)"
                )
            return "FINAL_VAR(sizes)"
        if "work in steps" in q:
            steps = [
                repl("parts = llm_query_batched(['a', 'bb', 'ccc'])\nprint(parts)"),
                repl("joined = '+'.join(parts)"),
                "FINAL_VAR(joined)",
            ]
            return steps[min(t, 2)]
        if "tally" in q:
            return (
                'FINAL({"label": "billing", "count": "three"})'
                if t == 0
                else 'FINAL({"label": "billing", "count": 3})'
            )
        if "loop forever" in q:
            return repl("x = 1")
        if "never valid" in q:
            return "FINAL(nope)"
        if "block" in q:
            self.blocked.set()
            self.release.wait(120)
            return "FINAL(released)"
        if "report pid" in q:
            if t == 0:
                return repl("import os\nprint('PID', os.getpid())")
            if t == 1:
                self.pids.append(int(re.search(r"PID (\d+)", last_user(messages)).group(1)))
                self.sleeping.set()
                return repl("import time\ntime.sleep(600)")
            return "FINAL(woke up)"
        return "FINAL(unscripted)"
