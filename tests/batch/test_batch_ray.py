"""`rlmx batch` and `rlmx eval` on a real two-node Ray cluster (a head and a second node started as their own
`ray start` processes on this machine, stopped by their PIDs), against the scripted model server.

The items are the tickets example, a different ticket file each, answered by a policy whose REPL code
greps and classifies (the gold is never in a reply): answers must be exact wherever they ran."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

import rlmx.batch  # noqa: E402
from batch_support import answers_exact, make_ticket_items, read_jsonl, write_jsonl  # noqa: E402
from container_support import launcher  # noqa: E402
from policies import tickets_policy  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402
from rlmx import RLM, ModelOptions, SandboxSettings  # noqa: E402
from rlmx.testing import ScriptedServer  # noqa: E402

pytestmark = pytest.mark.ray_cluster

KEY = f"sk-fake-{uuid.uuid4().hex}"  # the API key the workers must use and nothing may record
RLMX = [sys.executable, "-m", "rlmx.cli"]


def start_cluster(tmp: Path, **kwargs: Any) -> RayCluster:
    state = tmp / "node-state"
    state.mkdir(parents=True, exist_ok=True)
    # the nodes' state (traces by default, shipped contexts) under the test's folder, not the user's
    return RayCluster(env={"XDG_STATE_HOME": str(state)}, **kwargs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    c = start_cluster(tmp_path_factory.mktemp("ray"))
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.stop()  # by the PIDs it started; raises if any process of the cluster survives


@pytest.fixture
def driver(cluster: RayCluster, monkeypatch: pytest.MonkeyPatch) -> RayCluster:
    """This process as the cluster's driver: the fake key in its environment (as a user's would be)."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return cluster


def server(latency: float = 0.05, policy: Any = tickets_policy) -> ScriptedServer:
    # the server refuses requests without the key: answered requests prove the workers had it
    return ScriptedServer(policy, latency=latency, auth_token=KEY)


def run_batch(items: list[dict[str, Any]], srv: ScriptedServer, out: Path, address: str, **kw: Any) -> Any:
    kw.setdefault("concurrency", 4)
    kw.setdefault("cpus_per_item", 0.5)  # two items a node at once: they mostly wait for the model
    sandbox = SandboxSettings(kw.pop("sandbox", "process"))
    key = KEY if kw.pop("key_in_options", False) else None  # else the workers read it from the environment
    rlm = RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url, api_key=key), sandbox=sandbox)
    batch = rlmx.batch.run(items, rlm, out=out, executor="ray", address=address, **kw)
    results = list(batch)
    return batch, results


def files_containing(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(str(path))
        except OSError:  # sockets, files a node is rotating
            continue
    return found


def test_forty_items_on_two_nodes_are_exact_and_the_key_stays_out_of_results_and_ray_logs(
    driver: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is set in the RLM's model options (not in the driver's environment): the spec travels
    as data without it, the key sealed beside it."""
    monkeypatch.delenv("OPENAI_API_KEY")
    items, gold = make_ticket_items(tmp_path / "tickets", n=40, tickets=200)
    out = tmp_path / "results.jsonl"
    with server() as srv:
        batch, _ = run_batch(
            items, srv, out, driver.address, trace_dir=tmp_path / "traces", key_in_options=True
        )
    lines = read_jsonl(out)
    assert sorted(r["id"] for r in lines) == sorted(gold), "every id exactly once"
    assert answers_exact(lines, gold) == []
    assert {r["stopped_by"] for r in lines} == {"final"} and batch.summary.exit_code == 0
    nodes = {r["node"] for r in lines}
    assert len(nodes) >= 2 and nodes <= set(driver.node_ids().values())
    assert all(r["attempts"] == 1 and r["error"] is None for r in lines)
    for r in lines:  # each trace was written where its item ran, under --trace-dir
        assert r["trace_path"] and Path(r["trace_path"]).is_file()
        assert Path(r["trace_path"]).parent == tmp_path / "traces"
    # the ledger booked what the server served
    assert batch.summary.fleet["calls"] == srv.served == sum(r["usage"]["calls"] for r in lines)
    needle = KEY.encode()
    assert needle not in out.read_bytes()
    assert files_containing(driver.temp_dir, needle) == []  # Ray's session logs, of both nodes
    assert files_containing(tmp_path / "traces", needle) == []


def test_a_context_many_items_use_is_shipped_once_and_big_ones_are_read_from_their_path(
    driver: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlmx.batch.shipping

    items, gold = make_ticket_items(tmp_path / "tickets", n=2, tickets=150, seed0=600)
    text = Path(items[0]["context"]).read_text(encoding="utf-8")
    many = [
        *({**items[0], "id": f"a{i}"} for i in range(3)),  # one file, three items
        *({**items[0], "id": f"b{i}", "context": {"text": text}} for i in range(3)),  # the same text inline
        *({**items[1], "id": f"c{i}"} for i in range(2)),
    ]
    want = {r["id"]: gold[items[0]["id"] if r["id"][0] in "ab" else items[1]["id"]] for r in many}
    with server(latency=0.01) as srv:
        batch, results = run_batch(many, srv, tmp_path / "r.jsonl", driver.address)
    assert answers_exact(results, want) == [] and len(results) == 8
    executor = batch.executor
    assert len(executor.shipped) == 3, "three distinct contexts"
    assert len(executor.by_hash) == 3 and len({id(r) for r in executor.shipped.values()}) == 3
    # contexts over the threshold travel as their paths: the nodes read the same files
    monkeypatch.setattr(rlmx.batch.shipping, "SHIP_MAX_BYTES", 100)
    with server(latency=0.01) as srv:
        batch, results = run_batch(many, srv, tmp_path / "p.jsonl", driver.address)
    assert answers_exact(results, want) == []
    assert len(batch.executor.by_hash) == 1, "only the inline text was shipped"


def test_a_batch_budget_smaller_than_the_batch_needs_holds_at_the_server_and_a_rerun_finishes(
    driver: RayCluster, tmp_path: Path
) -> None:
    items, gold = make_ticket_items(tmp_path / "tickets", n=12, tickets=200, seed0=100)
    out = tmp_path / "results.jsonl"
    with server() as srv:
        batch, _ = run_batch(items, srv, out, driver.address, limits=rlmx.batch.BatchLimits(max_llm_calls=30))
        assert srv.served <= 30
        assert batch.summary.fleet["calls"] >= srv.served
    lines = read_jsonl(out)
    unstarted = [r for r in lines if r["attempts"] == 0]
    assert unstarted, "some items could not start within the budget"
    assert all(r["stopped_by"] == "batch_max_llm_calls" and r["answer"] is None for r in unstarted)
    assert batch.summary.exit_code == 3
    with server() as srv:
        batch, again = run_batch(items, srv, out, driver.address)
    assert {r["id"] for r in again} >= {r["id"] for r in unstarted}  # the unstarted ones ran now
    final = read_jsonl(out)
    assert sorted(r["id"] for r in final) == sorted(gold), "one line an id after the rerun"
    ran_now = [r for r in final if r["id"] in {u["id"] for u in unstarted}]
    assert answers_exact(ran_now, gold) == [] and {r["stopped_by"] for r in ran_now} == {"final"}


def test_a_fleet_rate_limit_holds_at_the_server_with_both_nodes_busy(
    driver: RayCluster, tmp_path: Path
) -> None:
    items, gold = make_ticket_items(tmp_path / "tickets", n=6, tickets=60, seed0=200)
    window, per_window = 1.0, 4  # --rpm 240 counted over 1 s: 4 requests in any second
    with server(latency=0.01) as srv:
        batch, results = run_batch(
            items, srv, tmp_path / "r.jsonl", driver.address, rpm=240, rate_window_s=window, concurrency=4
        )
        stamps = sorted(r.t_received for r in srv.requests)
    assert answers_exact(results, gold) == []
    assert len({r["node"] for r in results}) == 2
    assert batch.summary.fleet["rate_waits"] > 0, "the limit was what paced the fleet"
    busiest = max(sum(1 for t in stamps if s <= t < s + window) for s in stamps)
    assert busiest <= per_window, f"{busiest} requests within {window} s"


def test_resume_after_sigint_of_the_driver(driver: RayCluster, tmp_path: Path) -> None:
    items, gold = make_ticket_items(tmp_path / "tickets", n=16, tickets=200, seed0=300)
    write_jsonl(tmp_path / "in.jsonl", items)
    out = tmp_path / "out.jsonl"
    env = {**driver.driver_env(), "OPENAI_API_KEY": KEY}
    with server(latency=0.15) as srv:
        args = [*RLMX, "batch", str(tmp_path / "in.jsonl"), "--out", str(out), "--executor", "ray"]
        args += ["--address", driver.address, "--model", "openai:scripted", "--base-url", srv.url]
        args += ["--concurrency", "2", "--cpus-per-item", "0.5"]
        proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not out.exists() or len(read_jsonl(out)) < 2):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "rlmx: interrupted" in err
        first = read_jsonl(out)  # every line whole
        assert 2 <= len(first) < len(items)
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(first)} of {len(items)} items already in" in done.stderr
    lines = read_jsonl(out)
    assert sorted(r["id"] for r in lines) == sorted(gold)
    assert answers_exact(lines, gold) == []


def test_eval_runs_its_items_on_the_cluster_with_the_scores_of_a_local_run(
    driver: RayCluster, tmp_path: Path
) -> None:
    common = [
        "eval",
        "--oracle",
        "--suite",
        "niah,oolong",
        "--sizes",
        "8k",
        "--n",
        "3",
        "--baselines",
        "none",
    ]
    env = driver.driver_env()
    on_ray = subprocess.run(
        [*RLMX, *common, "--out", str(tmp_path / "ray"), "--executor", "ray", "--address", driver.address],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert on_ray.returncode == 0, on_ray.stderr
    here = subprocess.run(
        [*RLMX, *common, "--out", str(tmp_path / "local"), "-q"], capture_output=True, text=True
    )
    assert here.returncode == 0, here.stderr

    def scores(folder: Path) -> list[tuple[str, float, Any]]:
        rows = read_jsonl(folder / "results.jsonl")
        return sorted((r["item_id"], r["score"], r["answer"]) for r in rows)

    assert len(scores(tmp_path / "ray")) == 6
    assert scores(tmp_path / "ray") == scores(tmp_path / "local")
    again = subprocess.run(  # resumable as with the local executor: nothing left to run
        [*RLMX, *common, "--out", str(tmp_path / "ray"), "--executor", "ray", "--address", driver.address],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0 and "0 new results" in again.stderr


@pytest.fixture(scope="module")
def degraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A cluster of its own whose second node runs in a container (the launcher: Docker's capabilities,
    namespaces refused), and one test loses that node."""
    c = start_cluster(tmp_path_factory.mktemp("ray-degraded"), worker_prefix=launcher())
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.stop()


@pytest.fixture
def on_degraded(degraded: RayCluster, monkeypatch: pytest.MonkeyPatch) -> RayCluster:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return degraded


def test_a_node_in_a_container_runs_its_items_in_the_landlock_layer(
    on_degraded: RayCluster, tmp_path: Path
) -> None:
    """A node in a container (no user namespace can be made there) runs its items isolated by the
    Landlock layer instead of failing them; each result line names the layer its node used."""
    items, gold = make_ticket_items(tmp_path / "tickets", n=8, tickets=100, seed0=400)
    worker = on_degraded.node_ids()["worker"]
    with server(latency=0.01) as srv:
        batch, results = run_batch(items, srv, tmp_path / "a.jsonl", on_degraded.address)
    there = [r for r in results if r["node"] == worker]
    assert there, "some items ran on the node without user namespaces"
    assert {r["sandbox"] for r in there} == {"landlock"}
    assert {r["sandbox"] for r in results if r["node"] != worker} == {"namespaces"}
    assert answers_exact(results, gold) == [] and batch.summary.exit_code == 0


def test_losing_a_node_mid_batch_retries_its_items_elsewhere_and_books_their_calls(
    on_degraded: RayCluster, tmp_path: Path
) -> None:
    """The second node's raylet is killed while every running item waits for a reply (the server holds
    the requests until then), so the lost attempts had calls in flight."""
    items, gold = make_ticket_items(tmp_path / "tickets", n=16, tickets=200, seed0=500)
    worker = on_degraded.node_ids()["worker"]
    out = tmp_path / "results.jsonl"
    armed, release = threading.Event(), threading.Event()
    held: list[int] = []
    killed: list[int] = []
    batches: list[Any] = []

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if armed.is_set() and not release.is_set():
            held.append(1)
            release.wait(30)
        return str(tickets_policy(messages, request))

    def killer() -> None:
        armed.wait(120)
        deadline = time.monotonic() + 30
        while len(held) < 3 and time.monotonic() < deadline:  # at most two a node: both nodes wait
            time.sleep(0.02)
        killed.append(on_degraded.kill_raylet("worker"))
        deadline = time.monotonic() + 30  # held until the driver has booked the lost attempts
        while not batches or (batches[0].summary.lost_attempts < 1 and time.monotonic() < deadline):
            time.sleep(0.05)
        release.set()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    with server(latency=0.05, policy=policy) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url),
            sandbox=SandboxSettings("process-unisolated"),
        )
        batch = rlmx.batch.run(
            items, rlm, out=out, executor="ray", address=on_degraded.address, concurrency=4, cpus_per_item=0.5
        )
        batches.append(batch)
        for result in batch:
            if result["node"] == worker:  # the second node is busy with more items now
                armed.set()
        release.set()
        served = srv.served
    thread.join(30)
    assert killed, "an item finished on the second node before it was lost"
    lines = read_jsonl(out)
    assert sorted(r["id"] for r in lines) == sorted(gold), "every id exactly once"
    assert answers_exact(lines, gold) == []
    retried = [r for r in lines if r["attempts"] > 1]
    assert retried and all(r["node"] != worker for r in retried)
    assert batch.summary.lost_attempts >= 1
    fleet = batch.summary.fleet
    assert fleet["lost_calls"] >= 1, "calls in flight on the lost node are booked"
    assert fleet["calls"] >= served, f"the ledger counts {fleet['calls']} calls, the server served {served}"


def test_an_address_where_no_cluster_listens_is_one_line_exit_2_at_once(tmp_path: Path) -> None:
    items, _ = make_ticket_items(tmp_path / "tickets", n=1, tickets=50)
    write_jsonl(tmp_path / "in.jsonl", items)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    args = [*RLMX, "batch", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl")]
    args += ["--executor", "ray", "--address", f"127.0.0.1:{port}"]
    args += ["--model", "openai:scripted", "--base-url", "http://127.0.0.1:9/v1"]
    done = subprocess.run(
        args,
        env={**os.environ, "OPENAI_API_KEY": "x", "RAY_AUTH_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"rlmx: error: cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused; is `ray start "
        "--head` running there? (the head prints its address)"
    ]
    assert time.monotonic() - started < 30 and not (tmp_path / "out.jsonl").exists()


def test_a_worker_process_killed_mid_item_is_retried_and_the_batch_completes(
    driver: RayCluster, tmp_path: Path
) -> None:
    """SIGKILL of one Ray worker process while it runs an item (its model call held at the server)."""
    items, gold = make_ticket_items(tmp_path / "tickets", n=6, tickets=150, seed0=700)
    release = threading.Event()
    held: list[int] = []

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not release.is_set():
            held.append(1)
            release.wait(30)
        return str(tickets_policy(messages, request))

    victims: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 60
        while not held and time.monotonic() < deadline:
            time.sleep(0.02)
        running = [pid for pid, cmd in driver_processes(driver) if "ray::run_attempt" in cmd]
        if running:
            os.kill(running[0], signal.SIGKILL)
            victims.append(running[0])
        time.sleep(1.0)
        release.set()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    with server(latency=0.01, policy=policy) as srv:
        batch, _ = run_batch(items, srv, tmp_path / "r.jsonl", driver.address)
    thread.join(30)
    assert victims, "a worker process was running an item"
    lines = read_jsonl(tmp_path / "r.jsonl")
    assert sorted(r["id"] for r in lines) == sorted(gold) and answers_exact(lines, gold) == []
    assert batch.summary.lost_attempts >= 1 and any(r["attempts"] == 2 for r in lines)
    assert batch.summary.fleet["calls"] >= srv.served


def driver_processes(cluster: RayCluster) -> list[tuple[int, str]]:
    """(pid, command line) of the cluster's live processes."""
    out = []
    for pid in cluster.processes():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append((pid, cmd))
    return out
