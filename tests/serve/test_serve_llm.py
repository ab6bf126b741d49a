"""`rlmx serve` behind simonw/llm (PyPI `llm`), configured as an extra OpenAI model, as a user would.

`cat tickets.txt | llm -m rlmx-tickets "question"` sends one message: stdin and the prompt joined by a
space; `llm -f tickets.txt "question"` joins them with a newline. Either way the question must reach
the root model and the file must become the REPL's context. The real `llm` CLI is installed from PyPI
into a virtualenv of its own (cached inside the test venv; built once); without network it is skipped
with the reason, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policies import is_forced_final, is_rlm, is_root, question, repl, turn
from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, ServeProcess, rlmx_serve

LLM_VERSION = "0.36"
QUESTION = "How many tickets ask for a refund?"
MODEL_ID = "rlmx-tickets"


def tool_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the llm venv lives: beside the packages of the test venv (kept between runs, git-ignored
    with it), else in this session's tmp folder."""
    if sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / "rlmx-test-tools" / f"llm-{LLM_VERSION}"
    return tmp_path_factory.getbasetemp() / f"llm-{LLM_VERSION}"


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the llm CLI is needed under CI: {reason}")
    pytest.skip(f"the llm CLI could not be installed from PyPI (offline?): {reason}")


@pytest.fixture(scope="session")
def llm_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `llm` executable of a venv holding only llm==LLM_VERSION and its dependencies."""
    home = tool_home(tmp_path_factory)
    exe, ready = home / "bin" / "llm", home / ".installed"
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".llm-{LLM_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time (parallel sessions, xdist)
        if not (ready.is_file() and exe.is_file()):
            shutil.rmtree(home, ignore_errors=True)  # a half-made venv from an interrupted install
            pip = [str(home / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            steps = [[sys.executable, "-m", "venv", str(home)], [*pip, f"llm=={LLM_VERSION}"]]
            for step in steps:
                try:
                    done = subprocess.run(step, capture_output=True, text=True, timeout=600)
                except subprocess.TimeoutExpired:
                    unavailable(f"{' '.join(step[-2:])} took over 10 minutes")
                if done.returncode != 0:
                    tail = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")][-3:]
                    unavailable(f"{' '.join(step[-2:])} failed: {' / '.join(tail)}")
            ready.write_text(LLM_VERSION)
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert version.stdout.strip().endswith(LLM_VERSION), version.stdout + version.stderr
    return exe


def tickets_policy(messages: list[dict[str, Any]], request: Any) -> str:
    """The root counts refund tickets in its REPL context and reports what the context was."""
    if not is_rlm(request):
        return "sub"
    if is_forced_final(request) or question(messages) != QUESTION:
        return "FINAL(unexpected question)"
    if turn(messages) == 0:
        return repl(
            "tickets = [t for t in context.split('\\n\\n') if t.strip()]\n"
            "refunds = sum('refund' in t for t in tickets)\n"
            "summary = f'{refunds} of {len(tickets)} tickets; context {type(context).__name__} {len(context)}'"
        )
    return "FINAL_VAR(summary)"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(tickets_policy) as srv:
        yield srv


@pytest.fixture(scope="module")
def serve(model_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    state = tmp_path_factory.mktemp("llm-state")
    args = ["--model", "openai:scripted", "--base-url", model_server.url, "--name", "tickets"]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(state)}) as proc:
        yield proc


@pytest.fixture(scope="module")
def tickets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tickets separated by blank lines (so the last paragraph is a ticket, not the question)."""
    topics = ["asks for a refund of order {n}", "cannot log in since update {n}", "wants an invoice for {n}"]
    blocks = [f"ticket {n}\ncustomer {topics[n % 3].format(n=n)}\nstatus: open" for n in range(240)]
    path = tmp_path_factory.mktemp("llm-data") / "tickets.txt"
    path.write_text("\n\n".join(blocks) + "\n")
    assert path.stat().st_size > 8_000  # beyond the server's context threshold
    return path


def llm_env(serve: ServeProcess, tmp_path: Path) -> dict[str, str]:
    """An llm user folder with rlmx serve as an extra OpenAI model and the server's token as its key."""
    user = tmp_path / "llm-user"
    user.mkdir()
    (user / "extra-openai-models.yaml").write_text(
        f"- model_id: {MODEL_ID}\n  model_name: rlmx/tickets\n  api_base: {serve.url}\n  api_key_name: rlmx\n"
    )
    (user / "keys.json").write_text(json.dumps({"rlmx": TOKEN}))
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "SYSTEMROOT") if k in os.environ}
    return {**keep, "HOME": str(tmp_path), "LLM_USER_PATH": str(user)}


@pytest.mark.parametrize("how", ["stdin", "fragment"])
def test_llm_sends_the_file_as_context_and_the_prompt_as_the_question(
    llm_cli: Path,
    serve: ServeProcess,
    model_server: ScriptedServer,
    tickets: Path,
    tmp_path: Path,
    how: str,
) -> None:
    model_server.reset()
    text = tickets.read_text()
    if how == "stdin":  # cat tickets.txt | llm -m rlmx-tickets "question"
        command, stdin = [str(llm_cli), "-m", MODEL_ID, QUESTION], text
    else:  # llm -m rlmx-tickets -f tickets.txt "question"
        command, stdin = [str(llm_cli), "-m", MODEL_ID, "-f", str(tickets), QUESTION], ""
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=300, env=llm_env(serve, tmp_path)
    )
    assert done.returncode == 0, done.stderr
    context = text.rstrip("\n")  # the line breaks before the question are not part of the context
    assert done.stdout.strip() == f"80 of 240 tickets; context str {len(context)}"
    roots = [r for r in model_server.requests if is_root(r)]
    assert roots and all(question(r.messages) == QUESTION for r in roots)
    prompt = json.dumps([r.messages for r in roots])
    assert (
        "ticket 17" not in prompt and "customer asks for a refund" not in prompt
    )  # the data stayed in the REPL
