"""A batch with MCP servers on a real two-node Ray cluster (tests/ray_cluster.py): the preflight refuses a
stdio command that a node lacks before any item runs; otherwise every item's code reaches the server
started in its worker process, and a secret of the configuration is in no result, trace or Ray log."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_support import repl, small  # noqa: E402

import rlmx.batch  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402
from rlmx import RLM, ConfigError, ModelOptions, SandboxSettings  # noqa: E402
from rlmx.testing import ScriptedModel, ScriptedServer  # noqa: E402

pytestmark = pytest.mark.ray_cluster

SECRET = "mcp-ray-secret-5150"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    state = tmp_path_factory.mktemp("ray-state")
    c = RayCluster(env={"XDG_STATE_HOME": str(state)})
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.stop()


def batch(
    srv: ScriptedServer, servers: dict[str, object], out: Path, address: str
) -> list[dict[str, object]]:
    rlm = RLM(
        "openai:scripted",
        model_options=ModelOptions(base_url=srv.url, api_key="sk-test-fake"),
        sandbox=SandboxSettings("process"),
        mcp_servers={"mcpServers": servers},
    )
    items = [{"id": str(i), "question": f"q{i}"} for i in range(6)]
    return list(
        rlmx.batch.run(items, rlm, out=out, executor="ray", address=address, concurrency=4, cpus_per_item=0.5)
    )


def test_a_batch_on_ray_reaches_the_servers_of_its_worker_processes(
    cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    policy = ScriptedModel(root=[repl("FINAL(str(small_pid()) + ':' + str(len(small_show_env('TOKEN'))))")])
    with ScriptedServer(policy) as srv:
        rows = batch(
            srv, {"small": small(env={"TOKEN": SECRET})}, tmp_path / "results.jsonl", cluster.address
        )
    answers = [str(row["answer"]) for row in rows]
    assert len(rows) == 6 and all(a.endswith(":19") for a in answers), rows
    assert len({a.split(":")[0] for a in answers}) < 6  # a worker process's items share its server
    assert SECRET not in (tmp_path / "results.jsonl").read_text()
    logs = [p for p in Path(cluster.temp_dir).rglob("*") if p.is_file() and not p.is_symlink()]
    assert not [str(p) for p in logs if SECRET.encode() in p.read_bytes()]


def test_the_preflight_refuses_a_command_a_node_lacks_before_any_item(
    cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with ScriptedServer(ScriptedModel(root=["FINAL(x)"])) as srv:
        with pytest.raises(ConfigError) as caught:
            batch(
                srv, {"gone": {"command": "rlmx-no-such-mcp-server"}}, tmp_path / "r.jsonl", cluster.address
            )
        assert srv.served == 0
    assert "MCP server 'gone': the command 'rlmx-no-such-mcp-server' is not found here (PATH)" in str(
        caught.value
    )
    assert str(caught.value).startswith("on Ray node ")
    assert json.dumps(str(caught.value))
