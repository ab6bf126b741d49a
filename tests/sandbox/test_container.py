"""rlmx "in a container": this host made to look like Docker's default container by the launcher
(`rlmx.testing.container`: 14 capabilities, no namespaces, no_new_privs), so the default sandbox has to
pick the Landlock layer. Every check is on the HOST's state (its files, listeners, processes), or on
the exact answer of the support-tickets example, never on what a cell prints alone.

Structure (marker `container`; CI runs it, the quick run leaves it out):

- On the host (RLMX_IN_CONTAINER unset), each test starts a process under the launcher and judges it:
  the whole attack suite (tests/sandbox/test_attacks.py) as the container's root and as uid 65534
  with a Debian venv (tests/container_support.py; workers then share that uid), with
  RLMX_EXPECT_LAYER=landlock so each of its runs must say so; the support-tickets example through
  `rlmx ask`, a session, `rlmx batch` and `rlmx serve`; and what a run says once each layer is gone.
- Inside: `test_the_landlock_attacks_in_a_container` runs tests/sandbox/test_container_inside.py
  under the launcher (as root, and as uid 65534 from the venv's copy) with RLMX_IN_CONTAINER=1; only
  then do its tests run (elsewhere they are skipped): the Landlock attacks
  (tests/attack_cases/landlock.py) and two runs at once, against a host that pytest sets up itself (a
  temp HOME with an rlmx config, listeners, a `sleep` holding a secret). The outer test asserts that
  every one of them passed (none skipped).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from examples.support_tickets.generate import QUESTION, generate

from batch_support import answers_exact, make_ticket_items, read_jsonl, write_jsonl
from container_support import IN_CONTAINER_ENV, NOBODY, REPO, UserEnv, launcher, user_env
from policies import tickets_policy
from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, rlmx_serve

pytestmark = pytest.mark.container
INSIDE = bool(os.environ.get(IN_CONTAINER_ENV))
outside = pytest.mark.skipif(INSIDE, reason="starts the launcher itself (this pytest runs inside it)")
RLMX = [sys.executable, "-m", "rlmx.cli"]
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")


@pytest.fixture(scope="session")
def uservenv() -> UserEnv:
    env = user_env()
    print(f"\n[container] the uid {NOBODY} venv: {env.base} (built in {env.built_s:.1f} s; 0: reused)")
    return env


def counts(output: str) -> dict[str, int]:
    """The last pytest summary line of `output`, as {outcome: count}."""
    lines = [line for line in output.splitlines() if SUMMARY.search(line) and " in " in line]
    if not lines:
        return {}
    return {("error" if kind.startswith("error") else kind): int(n) for n, kind in SUMMARY.findall(lines[-1])}


def inner_pytest(
    prefix: list[str], args: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> dict[str, int]:
    """pytest under the launcher; asserts it passed and returns its counts."""
    cmd = [*prefix, *args, "-q", "-p", "no:cacheprovider", "-rfEs", "-m", ""]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    found = counts(done.stdout)
    assert found.get("failed", 0) == 0 and found.get("error", 0) == 0, tail
    return found


# --- a) and b): the attack suite in a container ------------------------------------------------------


@outside
def test_the_attack_suite_as_the_containers_root() -> None:
    env = {**os.environ, "RLMX_EXPECT_LAYER": "landlock"}
    prefix = [*launcher(), sys.executable, "-m", "pytest"]
    found = inner_pytest(prefix, ["tests/sandbox/test_attacks.py"], env, REPO, 900)
    assert found.get("passed", 0) > 40 and "skipped" not in found, found


@outside
def test_the_attack_suite_as_an_unprivileged_user(uservenv: UserEnv) -> None:
    env = {**os.environ, "RLMX_EXPECT_LAYER": "landlock"}
    prefix = [*launcher("--user", str(NOBODY)), *uservenv.python_command("-m", "pytest")]
    found = inner_pytest(prefix, ["tests/sandbox/test_attacks.py"], env, uservenv.repo, 900)
    assert found.get("passed", 0) > 40 and "skipped" not in found, found


# --- c): the Landlock attacks, from a pytest inside the launcher --------------------------------------


@outside
@pytest.mark.parametrize("who", ["root", "nobody"])
def test_the_landlock_attacks_in_a_container(who: str, request: pytest.FixtureRequest) -> None:
    from attack_cases.landlock import LANDLOCK_ATTACKS

    env = {**os.environ, IN_CONTAINER_ENV: "1"}
    if who == "root":
        prefix, cwd = [*launcher(), sys.executable, "-m", "pytest"], REPO
    else:
        venv: UserEnv = request.getfixturevalue("uservenv")
        prefix, cwd = [*launcher("--user", str(NOBODY)), *venv.python_command("-m", "pytest")], venv.repo
    module = ["tests/sandbox/test_container_inside.py"]
    found = inner_pytest(prefix, module, env, cwd, 600)
    assert found.get("passed") == len(LANDLOCK_ATTACKS) + 2 and "skipped" not in found, found


# --- d): the support-tickets example, exactly, with no sandbox flag ----------------------------------


def layer_in_trace(path: str | Path) -> str | None:
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "sandbox_ready":
            return str(record["layer"])
    return None


@pytest.fixture()
def tickets(tmp_path: Path) -> tuple[Path, int]:
    text, gold, _ = generate(seed=5)
    path = tmp_path / "tickets.txt"
    path.write_text(text)
    return path, int(gold)


def in_container(
    *args: str, opts: tuple[str, ...] = (), timeout: float = 180, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-fake"}
    cmd = [*launcher(*opts), *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=timeout)


@outside
def test_ask_answers_the_tickets_exactly_in_the_landlock_layer(
    tickets: tuple[Path, int], tmp_path: Path
) -> None:
    path, gold = tickets
    trace = tmp_path / "ask.jsonl"
    with ScriptedServer(tickets_policy) as srv:
        proc = in_container(
            *RLMX,
            "ask",
            QUESTION,
            "--context",
            str(path),
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            "--json",
            "--trace",
            str(trace),
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["answer"] == gold and out["stopped_by"] == "final"
    assert layer_in_trace(trace) == "landlock"
    notices = [
        line
        for line in proc.stderr.splitlines()
        if line.startswith("rlmx: model code runs isolated by Landlock")
    ]
    assert len(notices) == 1, proc.stderr  # once: which layer, and why not namespaces
    assert "cannot create a user namespace" in notices[0] and out["sandbox"] == "landlock"


SESSION = """
import json, sys
from rlmx import RLM, ModelOptions
rlm = RLM('openai:scripted', model_options=ModelOptions(base_url=sys.argv[1]), trace=sys.argv[3])
with rlm.session(open(sys.argv[2]).read()) as s:
    first = s.ask(sys.argv[4])
    second = s.ask(sys.argv[4])
print(json.dumps([[r.answer, r.stopped_by, r.sandbox, r.trace_path] for r in (first, second)]))
"""


@outside
def test_a_session_answers_the_tickets_exactly_in_the_landlock_layer(
    tickets: tuple[Path, int], tmp_path: Path
) -> None:
    path, gold = tickets
    with ScriptedServer(tickets_policy) as srv:
        proc = in_container(
            sys.executable, "-c", SESSION, srv.url, str(path), str(tmp_path / "s.jsonl"), QUESTION
        )
    assert proc.returncode == 0, proc.stderr
    for answer, stopped_by, sandbox, trace in json.loads(proc.stdout):
        assert (answer, stopped_by, sandbox) == (gold, "final", "landlock")
        assert layer_in_trace(trace) == "landlock"


@outside
def test_batch_answers_every_item_exactly_in_the_landlock_layer(tmp_path: Path) -> None:
    items, gold = make_ticket_items(tmp_path / "data", n=4)
    source, out = tmp_path / "items.jsonl", tmp_path / "results.jsonl"
    write_jsonl(source, items)
    with ScriptedServer(tickets_policy) as srv:
        proc = in_container(
            *RLMX,
            "batch",
            str(source),
            "--out",
            str(out),
            "--trace-dir",
            str(tmp_path / "t"),
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    rows = read_jsonl(out)
    assert sorted(r["id"] for r in rows) == sorted(gold) and answers_exact(rows, gold) == []
    for row in rows:
        assert row["stopped_by"] == "final" and row["sandbox"] == "landlock", row
        assert layer_in_trace(row["trace_path"]) == "landlock"


@outside
def test_serve_answers_the_tickets_exactly_in_the_landlock_layer(
    tickets: tuple[Path, int], tmp_path: Path
) -> None:
    path, gold = tickets
    with ScriptedServer(tickets_policy) as srv:
        cmd = [
            *launcher(),
            *RLMX,
            "serve",
            "--port",
            "0",
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            "--root",
            str(path.parent),
        ]
        with rlmx_serve(command=cmd, env={"XDG_STATE_HOME": str(tmp_path / "state")}) as serve:
            client = openai.OpenAI(base_url=serve.url, api_key=TOKEN, max_retries=0, timeout=120)
            completion = client.chat.completions.create(
                model="rlmx/scripted",
                messages=[{"role": "user", "content": QUESTION}],
                extra_body={"rlmx": {"paths": [path.name]}},
            )
            startup = serve.log()
    assert completion.choices[0].message.content == str(gold)
    assert "rlmx serve: model code runs isolated by Landlock (ABI " in startup, startup  # its start-up log
    info: dict[str, Any] = completion.model_extra["rlmx"]
    assert layer_in_trace(info["trace_path"]) == "landlock"


# --- f): every layer removed --------------------------------------------------------------------------


def ask_json(
    srv: ScriptedServer, *opts: str, sandbox: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return in_container(
        *RLMX,
        "ask",
        "q",
        "--context",
        "-",
        "--model",
        "openai:scripted",
        "--base-url",
        srv.url,
        "--json",
        "--no-trace",
        *sandbox,
        opts=opts,
        stdin="some text to read",
    )


@outside
@pytest.mark.parametrize(
    ("opts", "says"),
    [
        (("--no-landlock=enosys",), ("no user namespaces", "no Landlock (", "ENOSYS")),
        (("--no-landlock=eperm",), ("no user namespaces", "no Landlock (", "runtime refuses Landlock")),
        (("--no-libseccomp",), ("no user namespaces", "no seccomp (libseccomp is not installed")),
        (("--no-seccomp",), ("no user namespaces", "no seccomp (seccomp filters are refused")),
    ],
    ids=["no-landlock-enosys", "no-landlock-eperm", "no-libseccomp", "no-seccomp"],
)
def test_without_a_layer_a_run_stops_with_why(opts: tuple[str, ...], says: tuple[str, ...]) -> None:
    with ScriptedServer(lambda m, r: "```repl\nprint(1)\n```") as srv:
        proc = ask_json(srv, *opts)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stopped_by"] == "error" and out["answer"] is None
    for part in says:
        assert part in out["error"], out["error"]


@outside
def test_the_landlock_layer_by_name_without_landlock_is_exit_2_with_one_line() -> None:
    with ScriptedServer(lambda m, r: "FINAL(x)") as srv:
        proc = ask_json(srv, "--no-landlock=enosys", sandbox=("--sandbox", "process-landlock"))
        assert srv.requests == []
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Landlock" in lines[0], proc.stderr


@outside
def test_doctor_in_a_container_names_the_landlock_layer_and_exits_0() -> None:
    proc = subprocess.run(
        [*launcher(), *RLMX, "doctor", "--json"], capture_output=True, text=True, timeout=180, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["layer"] == "landlock" and report["isolated"] is True
    assert "cannot create a user namespace" in report["host"]["user_namespaces_missing"]
    assert all(probe["blocked"] for probe in report["probes"].values()), report["probes"]


@outside
def test_doctor_with_every_layer_removed_exits_1_and_says_why() -> None:
    proc = subprocess.run(
        [*launcher("--no-landlock=enosys"), *RLMX, "doctor"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("rlmx doctor: model code cannot run isolated here")
    assert "no user namespaces" in last and "no Landlock (" in last and "--sandbox process-unisolated" in last
