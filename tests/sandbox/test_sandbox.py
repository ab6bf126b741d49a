"""The sandbox backends through the real loop: isolation facts, limits, recovery, the zygote, fallbacks."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policies import is_child, is_rlm, last_user, question, repl, turn
from rlmx import Limits, SandboxSettings
from rlmx.context.payload import ContextPayload
from rlmx.sandbox.isolation import FAULT_ENV, SIMULATE_ENV
from rlmx.sandbox.pool import worker_env
from rlmx.sandbox.process import ProcessSandboxes
from rlmx.sandbox.rootfs import python_paths
from rlmx.testing import ScriptedModel, ScriptedServer
from sandbox_support import FOLLOW_UP, descendants, records, run_scripted, wait_no_descendants

REPORT = r"""
import json, os, resource
status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
lims = {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('NPROC', 'FSIZE', 'NOFILE', 'CPU', 'AS')}
print('REPORT', json.dumps({
    'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(), 'groups': os.getgroups(),
    'cap_eff': status['CapEff'].strip(), 'cap_bnd': status['CapBnd'].strip(),
    'no_new_privs': status['NoNewPrivs'].strip(), 'pid': os.getpid(), 'cwd': os.getcwd(),
    'hostname': os.uname().nodename, 'env': sorted(os.environ), 'pids': sorted(p for p in os.listdir('/proc') if p.isdigit()),
    'ifaces': [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]],
    'root': sorted(os.listdir('/')), 'etc': sorted(os.listdir('/etc')), 'stdin': os.readlink('/proc/self/fd/0'),
    'fds': sorted(os.listdir('/proc/self/fd')), 'limits': lims,
}))
"""


def report(outcome: Any, n: int = 1) -> dict[str, Any]:
    match = re.search(r"REPORT (\{.*\})", outcome.said_after(n))
    assert match, outcome.said_after(n)
    return json.loads(match.group(1))


def test_the_default_worker_is_unprivileged_alone_and_limited() -> None:
    host_view: dict[str, Any] = {}

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "sub-ok"
        if turn(messages) == 0:
            return repl(REPORT)
        if "uids" not in host_view:  # the worker is alive now: look at the tree from the host's side
            host_view["uids"] = {pid: outer_uid(pid) for pid in descendants(os.getpid())}
        return "FINAL(done)"

    settings = SandboxSettings(max_processes=40, max_file_mb=20, max_open_files=99, worker_cpu_s=500)
    out = run_scripted(policy, sandbox=settings)
    assert out.result.stopped_by == "final"
    seen = report(out)
    assert seen["uid"] != 0 and seen["euid"] != 0 and seen["groups"] == []
    assert int(seen["cap_eff"], 16) == 0 and int(seen["cap_bnd"], 16) == 0 and seen["no_new_privs"] == "1"
    assert seen["hostname"] == "rlmx-sandbox" and seen["ifaces"] == ["lo"]
    assert seen["cwd"] == "/tmp" and seen["stdin"] == "/dev/null"
    assert set(seen["pids"]) <= {"1", str(seen["pid"])}  # its own PID namespace: nothing else is visible
    assert set(seen["env"]) <= set(worker_env("/tmp")) and not any("KEY" in k for k in seen["env"])
    assert seen["etc"] and "shadow" not in seen["etc"] and "passwd" in seen["etc"]
    # the root holds the system directories and whatever holds this Python (venv, checkout): nothing else
    python_tops = {Path(p).parts[1] for p in python_paths() if len(Path(p).parts) > 1}
    system = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"}
    assert set(seen["root"]) <= system | python_tops
    assert not {"var", "run", "boot", "mnt", "srv", "media"} & set(seen["root"])
    # fds: 0-2, the two pipes, the output capture file, and the one listdir itself opened
    assert len(seen["fds"]) <= 7
    limits = seen["limits"]
    assert limits["NPROC"] == [40, 40] and limits["NOFILE"] == [99, 99]
    assert limits["FSIZE"] == [20 * 2**20] * 2 and limits["CPU"][1] == 500
    # from the host: the process that ran the cell has an unprivileged outer uid (never root)
    outer = sorted(host_view["uids"].values())
    assert outer and max(outer) >= 2_000_000_000
    assert not wait_no_descendants(os.getpid())  # nothing of the run outlives it


def test_host_files_are_out_of_view_and_the_view_is_read_only(tmp_path: Path) -> None:
    secret = tmp_path / "planted.txt"
    secret.write_text("planted-secret-value")
    code = f"""
import os
for path in [{str(secret)!r}, '/etc/shadow', '/root/.bashrc', '/var/log', '/home']:
    print(path, os.path.exists(path))
for path in ['/usr/x', '/etc/x', '/x', {str(Path.cwd() / "src" / "x")!r}]:
    try:
        open(path, 'w')
        print('WROTE', path)
    except OSError as exc:
        print('refused', path, exc.errno)
import json
print(len(json.dumps({{'python': 'works'}})))
"""
    out = run_scripted(ScriptedModel(root=[repl(code), FOLLOW_UP, "FINAL(done)"]))
    said = out.said_after(1)
    assert f"{secret} False" in said and "/etc/shadow False" in said and "/home False" in said
    assert "WROTE" not in said and said.count("refused") == 4
    assert out.continued and not list(tmp_path.glob("x"))


def test_scratch_dir_is_private_capped_and_fresh_after_a_restart() -> None:
    code_fill = """
with open('/tmp/keep.txt', 'w') as fh:
    fh.write('kept')
try:
    with open('/tmp/big', 'wb') as fh:
        for _ in range(64):
            fh.write(b'x' * 2**20)
except OSError as exc:
    print('stopped', exc.errno)
"""
    out = run_scripted(
        ScriptedModel(
            root=[
                repl(code_fill),
                repl("import os\nprint(sorted(os.listdir('/tmp')))"),
                repl("import os\nos._exit(1)"),
                repl("import os\nprint('after', sorted(os.listdir('/tmp')))"),
                "FINAL(done)",
            ]
        ),
        sandbox=SandboxSettings(scratch_mb=16, max_file_mb=512),
        limits=Limits(max_iterations=6),
    )
    assert "stopped 28" in out.said_after(1)  # ENOSPC: the scratch dir's size cap
    assert "keep.txt" in out.said_after(2) and "REPL process died" in out.said_after(3)
    after = out.said_after(4)  # a restarted REPL gets a fresh working directory: the old files are gone
    # (a checkout or venv that lives under the host's /tmp is mounted there read-only, so it may be listed)
    assert "after [" in after and "keep.txt" not in after and "'big'" not in after


def test_a_cell_over_its_cpu_time_is_stopped_and_the_repl_keeps_its_variables() -> None:
    out = run_scripted(
        ScriptedModel(
            root=[repl("kept = 41\nwhile True:\n    pass"), repl("print('kept', kept + 1)"), "FINAL(done)"]
        ),
        sandbox=SandboxSettings(cell_cpu_s=1, cell_timeout_s=60),
    )
    assert "CPUTimeExceeded" in out.said_after(1) and "restarted" not in out.said_after(1)
    assert "kept 42" in out.said_after(2)


SPIN = "import threading, time\nkept = 1\ndef spin():\n    while True:\n        pass\n"
SPIN += "threading.Thread(target=spin, daemon=True).start()\n"


def test_threads_still_burning_cpu_after_the_cpu_limit_get_the_repl_restarted() -> None:
    out = run_scripted(
        ScriptedModel(
            root=[
                repl(SPIN + "while True:\n    time.sleep(0.01)"),
                repl("print('kept' in globals())"),
                "FINAL(done)",
            ]
        ),
        sandbox=SandboxSettings(cell_cpu_s=1, cell_timeout_s=60),
    )
    assert "CPUTimeExceeded" in out.said_after(1) and "the REPL was restarted" in out.said_after(1)
    assert "False" in out.said_after(2)


def test_threads_left_running_between_cells_are_stopped_before_the_next_cell() -> None:
    import time

    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        if turn(messages) == 0:
            return repl(SPIN + "print('started')")
        if turn(messages) == 1:  # the model thinks; the thread burns the worker's CPU allowance meanwhile
            workers = [pid for pid in descendants(os.getpid()) if outer_uid(pid) >= 2_000_000_000]
            deadline = time.monotonic() + 120
            while any(os.path.exists(f"/proc/{pid}") for pid in workers) and time.monotonic() < deadline:
                time.sleep(0.05)
            return repl("print('kept' in globals())")
        return "FINAL(done)"

    out = run_scripted(policy, sandbox=SandboxSettings(cell_cpu_s=1, cell_timeout_s=60))
    said = out.said_after(2)
    assert "started" in out.said_after(1)
    assert "the REPL process ended after the previous cell" in said and "False" in said


def outer_uid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh.read().splitlines())
    except OSError:
        return -1
    return int(fields["Uid"].split()[0])


def test_forks_made_by_model_code_never_speak_on_the_pipes() -> None:
    code = """
import os
from multiprocessing import Pool
with Pool(2) as pool:
    print('pool', pool.map(abs, [-1, -2, -3]))
pid = os.fork()
print('forked' if pid else 'child-copy')
if pid:
    os.waitpid(pid, 0)
"""
    out = run_scripted(ScriptedModel(root=[repl(code), FOLLOW_UP, "FINAL(done)"]))
    said = out.said_after(1)
    assert "pool [1, 2, 3]" in said and "forked" in said
    assert out.result.stopped_by == "final" and out.continued


def test_children_fork_from_the_zygote_and_a_new_value_is_all_a_child_gets() -> None:
    check = (
        "import rlmx.sandbox.worker as w\n"
        "print('INHERITS', context is w.INHERITED[0], len(context))\n"
        "n = len(context)"
    )

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        if is_child(request):  # asked "child same" or "child slice"
            return repl(check) if turn(messages) == 0 else "FINAL_VAR(n)"
        if turn(messages) == 0:
            return repl(
                "r = [rlm_query('child same'), rlm_query('child slice', context=context[:5])]\nprint(r)"
            )
        return "FINAL_VAR(r)"

    out = run_scripted(policy, "0123456789" * 100, limits=Limits(max_depth=2, max_llm_calls=20))
    assert out.result.answer == ["1000", "5"]
    child_out = [r["output"]["text"] for r in records(out) if r["type"] == "exec" and r["depth"] == 1]
    assert sorted(child_out) == ["INHERITS False 5\n", "INHERITS True 1000\n"]


def test_sixteen_parallel_children_never_see_each_others_output() -> None:
    child_code = """
import os, subprocess, sys, time
me = question_id
for j in range(150):
    print(f'{me}:{j}')
    if j % 50 == 0:
        sys.stderr.write(f'{me}:err{j}\\n')
        time.sleep(0.005)
os.write(1, f'{me}:fd\\n'.encode())
subprocess.run(['echo', f'{me}:sub'])
"""

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        q = question(messages)
        if is_child(request):  # asked "child cNN"
            if turn(messages) == 0:
                return repl(f"question_id = {q.split()[1]!r}\n" + child_code)
            return "FINAL(ok)"
        if turn(messages) == 0:
            return repl("res = rlm_query_batched([f'child c{i:02d}' for i in range(16)])\nprint(res)")
        return "FINAL_VAR(res)"

    limits = Limits(max_depth=2, max_llm_calls=80, max_concurrent_children=16)
    out = run_scripted(policy, limits=limits)
    assert out.result.answer == ["ok"] * 16
    outputs: dict[str, str] = {}
    for r in out.requests:
        if is_child(r) and turn(r.messages) == 1:
            outputs[question(r.messages).split()[1]] = last_user(r.messages)
    assert sorted(outputs) == [f"c{i:02d}" for i in range(16)]
    for me, text in outputs.items():
        tags = re.findall(r"\b(c\d\d):", text)
        assert tags and set(tags) == {me}, (me, text[:300])  # only its own lines, none of the others'
        assert all(f"{me}:{j}\n" in text for j in range(150))
        assert f"{me}:fd" in text and f"{me}:sub" in text and f"{me}:err100" in text


@pytest.mark.parametrize("switch", [(SIMULATE_ENV, "unavailable"), (FAULT_ENV, "namespaces-mount")])
def test_the_default_falls_back_to_landlock_without_namespaces(
    monkeypatch: pytest.MonkeyPatch, switch: tuple[str, str]
) -> None:
    """No user namespace (refused at `unshare`), or one that fails midway (a mount refused, as under
    Ubuntu's AppArmor restriction): the same run goes on in the Landlock layer, and says why."""
    monkeypatch.setenv(*switch)
    code = "import os\nprint('cell-' + 'ran', os.getuid(), os.getcwd())\nprint(len(os.listdir('/proc')))"
    out = run_scripted(ScriptedModel(root=[repl(code), "FINAL(done)"]))
    assert out.result.stopped_by == "final"
    users = [m["content"] for r in out.requests for m in r.messages if m["role"] == "user"]
    ran = next(text for text in users if "cell-ran" in text)
    assert "PermissionError" in ran  # /proc is out of reach
    uid = int(ran.split("cell-ran ", 1)[1].split()[0])
    assert uid != os.getuid() and uid >= SandboxSettings().worker_uid_first
    ready = next(r for r in records(out) if r["type"] == "sandbox_ready")
    assert ready["layer"] == "landlock" and ready["worker_ids"] == "per-worker" and ready["seccomp"]
    assert "namespaces" in ready["unavailable"]


def test_reduced_isolation_is_explicit_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIMULATE_ENV, "unavailable")
    monkeypatch.setenv("RLMX_TEST_SECRET_TOKEN", "tok-unisolated-secret")
    code = "import os, resource\nprint('ENV', sorted(os.environ))\nprint('CWD', os.getcwd())\n"
    code += "print('NOFILE', resource.getrlimit(resource.RLIMIT_NOFILE))"
    settings = SandboxSettings(backend="process-unisolated", max_open_files=77)
    out = run_scripted(ScriptedModel(root=[repl(code), "FINAL(done)"]), sandbox=settings)
    assert out.result.stopped_by == "final"
    said = out.said_after(1)
    assert "tok-unisolated-secret" not in out.bodies and "RLMX_TEST_SECRET_TOKEN" not in said
    assert "NOFILE (77, 77)" in said
    cwd = re.search(r"CWD (\S+)", said)
    assert cwd and "rlmx-repl-" in cwd.group(1) and not Path(cwd.group(1)).exists()  # removed afterwards
    assert records(out)[0]["sandbox"]["backend"] == "process-unisolated"


def test_shared_id_mode_drops_every_capability(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As started by a user other than root: one mapped uid, so workers keep it and lose all capabilities."""
    monkeypatch.setenv(SIMULATE_ENV, "single-id")
    (tmp_path / "planted.txt").write_text("x")
    code = (
        REPORT
        + f"""
import os, subprocess
print('PLANTED', os.path.exists({str(tmp_path / "planted.txt")!r}))
print('NESTED', subprocess.run(['unshare', '-r', 'true']).returncode)
print('SHELL-CAPS', subprocess.run(['grep', 'CapEff', '/proc/self/status'], capture_output=True, text=True).stdout)
"""
    )
    out = run_scripted(ScriptedModel(root=[repl(code), "FINAL(done)"]))
    seen = report(out)
    said = out.said_after(1)
    assert seen["uid"] == 0 and int(seen["cap_eff"], 16) == 0 and int(seen["cap_bnd"], 16) == 0
    assert seen["ifaces"] == ["lo"] and "PLANTED False" in said and "NESTED 0" not in said
    assert "CapEff:\t0000000000000000" in said  # a program it runs gets no capabilities either


def test_local_backend_runs_in_process_and_parallel_children_keep_their_output() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        q = question(messages)
        if is_child(request):  # asked "child tN"
            if turn(messages) == 0:
                tag = q.split()[1]
                return repl(f"import time\nfor j in range(50):\n    print('{tag}', j)\n    time.sleep(0.001)")
            return "FINAL(ok)"
        if turn(messages) == 0:
            return repl(
                "import os\nhost = os.getpid()\nres = rlm_query_batched([f'child t{i}' for i in range(4)])"
            )
        if turn(messages) == 1:
            return repl("keep = 5\nwhile True:\n    pass")
        return repl("print('keep', keep, host)") if turn(messages) == 2 else "FINAL_VAR(res)"

    settings = SandboxSettings(backend="local", cell_timeout_s=1.0)
    out = run_scripted(policy, sandbox=settings, limits=Limits(max_depth=2, max_llm_calls=30))
    assert out.result.answer == ["ok"] * 4
    assert "TimeoutError" in out.said_after(2) and f"keep 5 {os.getpid()}" in out.said_after(3)
    for r in out.requests:
        if is_child(r) and turn(r.messages) == 1:
            tag = question(r.messages).split()[1]
            assert set(re.findall(r"\b(t\d) \d+", last_user(r.messages))) == {tag}
    assert SandboxSettings().backend == "process"  # never the default


def test_a_dead_zygote_is_started_again() -> None:
    async def scenario() -> tuple[str, str]:
        boxes = ProcessSandboxes(SandboxSettings())
        box = boxes()
        await box.start(ContextPayload.of("abc"))
        assert boxes.pool.proc is not None
        os.killpg(boxes.pool.proc.pid, 9)  # the zygote and everything under it
        await boxes.pool.proc.wait()
        for _ in range(200):  # until the REPL's reader has seen its pipe close (deterministic below)
            if not box.inbox.empty():
                break
            await asyncio.sleep(0.05)
        first = await box.execute("print(len(context))", no_rpc)
        second = await box.execute("print(len(context))", no_rpc)
        await box.close()
        await boxes.aclose()
        assert first.restarted and first.error is None
        return first.output, second.output

    first, second = asyncio.run(scenario())
    # the death is noticed before the next cell, which runs in a new REPL from a new zygote
    assert first.startswith("[the REPL process ended") and first.endswith("\n3\n") and second == "3\n"
    assert not wait_no_descendants(os.getpid())


async def no_rpc(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError("no sub-calls here")


def test_a_child_cancelled_while_starting_leaves_the_run_s_other_repls_alone() -> None:
    async def scenario() -> tuple[str, str, int]:
        boxes = ProcessSandboxes(SandboxSettings())
        root = boxes()
        await root.start(ContextPayload.of("abc"))
        child = boxes()
        starting = asyncio.ensure_future(child.start(root.payload))
        await asyncio.sleep(0)
        starting.cancel()
        await asyncio.wait([starting])
        await child.close()
        first = await root.execute("print(len(context))", no_rpc)
        second = boxes()
        await second.start(root.payload)
        other = await second.execute("print(2)", no_rpc)
        await second.close()
        await root.close()
        await boxes.aclose()
        return first.output, other.output, boxes.pool.starts

    first, other, starts = asyncio.run(scenario())
    assert first == "3\n" and other == "2\n" and starts == 1  # the zygote was never restarted
    assert not wait_no_descendants(os.getpid())


SOURCE_UNDER_TMP = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import rlmx
assert rlmx.__file__.startswith(sys.argv[1]), rlmx.__file__
from rlmx.context.payload import ContextPayload
from rlmx.sandbox.base import SandboxSettings
from rlmx.sandbox.process import ProcessSandboxes
from rlmx.sandbox.rootfs import python_paths

async def main():
    boxes = ProcessSandboxes(SandboxSettings())
    box = boxes()
    await box.start(ContextPayload.of("abc"))
    code = "import rlmx.repl.vectors as v\\nopen('/tmp/scratch.txt', 'w').write('ok')\\nprint(v.__file__)"
    result = await box.execute(code, None)
    print("WORKER", result.output.strip(), result.error)
    await box.close()
    await boxes.aclose()

asyncio.run(main())
"""


def test_an_import_path_under_tmp_stays_visible_beside_the_worker_s_own_tmp(tmp_path: Path) -> None:
    """A checkout or virtual environment under /tmp (a CI clone, say) is bound again inside each
    worker's private /tmp, so modules first imported by model code are still found."""
    import shutil

    copy = tmp_path / "src"
    shutil.copytree(Path(__file__).resolve().parents[2] / "src" / "rlmx", copy / "rlmx")
    proc = subprocess.run(
        [sys.executable, "-c", SOURCE_UNDER_TMP, str(copy)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert f"WORKER {copy}/rlmx/repl/vectors.py None" in proc.stdout


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown backend 'docker'"):
        SandboxSettings(backend="docker")
    with pytest.raises(ValueError, match="memory_mb must be >= 16"):
        SandboxSettings(memory_mb=1)


def test_cli_sandbox_option(tmp_path: Path) -> None:
    def ask(*extra: str, url: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "rlmx.cli", "ask", "q", "--model", "openai:scripted", "--base-url", url]
        cmd += ["--no-trace", "--quiet", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    policy = ScriptedModel(root=[repl("import os\nprint(os.getuid())"), "FINAL(done)"])
    with ScriptedServer(policy) as srv:
        bad = ask("--sandbox", "docker", url=srv.url)
        unisolated = ask("--sandbox", "process-unisolated", url=srv.url)
        default = ask(url=srv.url)
    assert bad.returncode == 2 and "--sandbox: unknown backend 'docker'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert unisolated.returncode == 0 and "reduced isolation" in unisolated.stderr
    assert default.returncode == 0 and default.stdout.strip() == "done" and "warning" not in default.stderr


REAP_NESTED = r"""
import os, socket, time
from rlmx.sandbox import frames
from rlmx.sandbox.zygote import Zygote

limits = frames.Rlimits(cpu_s=10, memory_mb=100, processes=10, file_mb=1, open_files=10)
setup = frames.Setup("namespaces", {}, 1000, 10, limits, scratch_mb=1, staging="", tmp_base="/tmp", context_kind="none",
                     context_options={})
zygote = Zygote(socket.socketpair()[0], setup, [], ids=object())
pids = set()
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    pids.add(pid)
zygote.children |= pids
time.sleep(0.3)  # both have exited: two zombies
real_waitpid, nested = os.waitpid, []

def waitpid(pid, options):
    if not nested:  # as if a second SIGCHLD arrived here: the handler runs again, inside itself
        nested.append(pid)
        zygote._reap()
    return real_waitpid(pid, options)

os.waitpid = waitpid
zygote._reap()
try:
    os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG)
    left = "some"
except ChildProcessError:
    left = "none"
print("reaped", left, sorted(zygote.children), len(nested))
"""


def test_the_zygote_s_reaper_survives_a_nested_sigchld() -> None:
    """A SIGCHLD arriving while the reaper runs re-enters it; the inner call reaps what the outer one
    was about to (a run of 16 parallel children once saw the zygote die of that, taking every REPL
    of the run with it)."""
    out = subprocess.run([sys.executable, "-c", REAP_NESTED], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["reaped", "none", "[]", "1"]


@pytest.mark.timeout(60)
def test_a_run_that_needs_no_repl_does_not_wait_for_its_start_and_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FINAL on the first turn: the REPL's start (here: a zygote that never gets its setup) is stopped
    rather than waited for, and its zygote is killed, not left to finish starting."""
    import rlmx.sandbox.pool as pool

    async def never_sent(*args: Any, **kwargs: Any) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(pool, "send_frame", never_sent)
    started: list[int] = []
    real_start = pool.WorkerPool._start

    async def start(self: pool.WorkerPool) -> None:
        started.append(1)
        await real_start(self)

    monkeypatch.setattr(pool.WorkerPool, "_start", start)
    outcome = run_scripted(ScriptedModel(root=["FINAL(done)"]))
    assert outcome.result.answer == "done" and outcome.result.stopped_by == "final"
    assert started == [1]  # the zygote was started, and never finished starting
    assert wait_no_descendants(os.getpid()) == set()


def test_the_landlock_layer_sweeps_what_a_killed_host_left() -> None:
    """A scratch directory whose lock nobody holds was left by a host that was killed: the next zygote
    of the Landlock layer removes it (and kills what its uid still runs) before it forks a worker."""
    import subprocess
    import tempfile

    state = Path(tempfile.gettempdir()) / f"rlmx-confine-{os.geteuid()}"
    state.mkdir(mode=0o711, exist_ok=True)
    uid = SandboxSettings().worker_uid_first + SandboxSettings().worker_uid_count - 1  # never taken first
    stale = state / f"u{uid}"
    stale.mkdir(exist_ok=True)
    (stale / "left-behind.txt").write_text("from a killed host")
    (state / f"u{uid}.lock").touch()
    survivor = subprocess.Popen(["sleep", "300"], user=uid, group=uid)  # a process that uid still runs
    try:
        out = run_scripted(
            ScriptedModel(root=[repl("print('ran')"), "FINAL(done)"]),
            sandbox=SandboxSettings(backend="process-landlock"),
        )
        assert out.result.stopped_by == "final"
        assert not stale.exists()
        assert survivor.wait(timeout=10) == -9  # killed by the sweep
    finally:
        if survivor.poll() is None:
            survivor.kill()
