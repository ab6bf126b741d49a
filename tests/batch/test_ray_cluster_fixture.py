"""The two-node Ray test cluster itself: both nodes up, a task on each, and nothing left after stop()."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from ray_cluster import RayCluster, still_alive  # noqa: E402

pytestmark = pytest.mark.ray_cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    c = RayCluster(worker_resources={"worker_slot": 2})
    try:
        ray.init(address=c.address, log_to_driver=False)
        yield c
    finally:
        ray.shutdown()
        c.stop()
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


@ray.remote(num_cpus=1)
def node_of_task() -> str:
    return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=1, max_retries=0)
def meet(directory: str, me: int, parties: int) -> str:
    """Wait (holding the CPU: no ray.get) until `parties` tasks are running at once."""
    Path(directory, str(me)).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(directory)) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {os.listdir(directory)} of {parties} tasks ever ran at once")
        time.sleep(0.02)
    return ray.get_runtime_context().get_node_id()


def test_two_alive_nodes_with_distinct_ids(cluster: RayCluster) -> None:
    ids = cluster.node_ids()
    assert set(ids) == {"head", "worker"}
    assert ids["head"] != ids["worker"]
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert alive == set(ids.values())
    head = next(n for n in ray.nodes() if n["NodeID"] == ids["head"])
    assert "node:__internal_head__" in head["Resources"]
    worker = next(n for n in ray.nodes() if n["NodeID"] == ids["worker"])
    assert worker["Resources"].get("worker_slot") == 2
    # The driver in this process attaches to the head's raylet.
    assert ray.get_runtime_context().get_node_id() == ids["head"]
    assert cluster.raylet_pid("head") != cluster.raylet_pid("worker")


def test_a_task_lands_on_each_node(cluster: RayCluster) -> None:
    ids = cluster.node_ids()
    for node_id in ids.values():
        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        assert ray.get(node_of_task.options(scheduling_strategy=strategy).remote(), timeout=60) == node_id
    # Unpinned: two one-CPU tasks that must run at the same time can only do so on both nodes. (Short
    # tasks alone prove nothing: the owner pipelines them on one leased worker, even with "SPREAD".)
    barrier = cluster.temp_dir / "barrier"
    barrier.mkdir()
    seen = ray.get([meet.remote(str(barrier), i, 2) for i in range(2)], timeout=120)
    assert set(seen) == set(ids.values())


def test_stop_leaves_no_process_behind(cluster: RayCluster) -> None:
    before = cluster.processes()
    blocks = {cluster.block_pid("head"), cluster.block_pid("worker")}
    raylets = {cluster.raylet_pid("head"), cluster.raylet_pid("worker")}
    assert blocks | raylets <= set(before)
    assert len(before) >= 8  # gcs, raylets, agents, monitors, workers
    ray.shutdown()
    cluster.stop()
    assert still_alive(before) == []
    assert not cluster.temp_dir.exists()
