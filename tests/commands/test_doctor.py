"""`rlmx doctor` from a shell, on this host (root, user namespaces and Landlock available): the layer a
real worker gets, the live probes' verdicts, the model a run would use (never a key), exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlmx.commands.doctor_probes import Host
from rlmx.sandbox.isolation import SIMULATE_ENV
from rlmx.sandbox.probe import host_support

RLMX = [sys.executable, "-m", "rlmx.cli"]
PROBES = {"network", "home", "processes", "shadow"}
KEYS = {"host", "layer", "worker_ids", "unavailable", "notes", "probes", "model", "isolated", "reason"}
MODEL_ENV = ("RLMX_MODEL", "RLMX_SUB_MODEL", SIMULATE_ENV)

HOST = host_support()
needs_layers = pytest.mark.skipif(
    HOST.user_namespaces_missing is not None or HOST.landlock_layer_missing is not None or not HOST.root,
    reason="these cases are written for a root host with user namespaces and Landlock",
)


def doctor(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run in an empty directory, with no user config and no provider key but those given."""
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in MODEL_ENV}
    full = {**base, "XDG_CONFIG_HOME": str(tmp_path / "config"), **(env or {})}
    return subprocess.run(
        [*RLMX, "doctor", *args], capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120
    )


def line(out: str, start: str) -> str:
    found = [ln.strip() for ln in out.splitlines() if ln.strip().startswith(start)]
    assert len(found) == 1, out
    return found[0]


@needs_layers
def test_the_default_sandbox_runs_isolated_by_namespaces(tmp_path: Path) -> None:
    proc = doctor(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert "sandbox: process -> layer namespaces" in proc.stdout
    assert line(proc.stdout, "user namespaces:") == "user namespaces: available"
    assert line(proc.stdout, "Landlock:").startswith(f"Landlock: ABI {HOST.landlock_abi}")
    assert line(proc.stdout, "network:").startswith("network: blocked")
    home = Path.home().resolve()
    assert line(proc.stdout, "home (").startswith(f"home ({home}): out of reach")
    assert line(proc.stdout, "processes:").startswith("processes: blocked")
    assert line(proc.stdout, "/etc/shadow:").startswith("/etc/shadow: out of reach")
    assert "REACHABLE" not in proc.stdout
    assert (
        proc.stdout.strip().splitlines()[-1]
        == "rlmx doctor: model code runs isolated here (layer namespaces)"
    )


@needs_layers
def test_the_landlock_layer_named_gives_each_worker_a_uid(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--sandbox", "process-landlock", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= KEYS and set(out["probes"]) == PROBES
    assert (
        out["layer"] == "landlock"
        and out["worker_ids"] == "per-worker"
        and out["sandbox"] == "process-landlock"
    )
    assert out["host"] == HOST.to_data()
    assert all(probe["blocked"] is True for probe in out["probes"].values()), out["probes"]
    assert out["probes"]["home"]["path"] == str(Path.home().resolve())
    assert out["probes"]["processes"]["pid"] > 0
    assert out["isolated"] is True and out["reason"] is None
    assert set(out["model"]) >= {"model", "sub_model", "base_url", "key_env", "key_set"}


@needs_layers
def test_a_key_is_named_never_printed(tmp_path: Path) -> None:
    secret = "sk-test-secret-123"
    for args in ((), ("--json",)):
        proc = doctor(tmp_path, *args, env={"OPENAI_API_KEY": secret})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert secret not in proc.stdout + proc.stderr
    assert line(doctor(tmp_path, env={"OPENAI_API_KEY": secret}).stdout, "key:") == "key: OPENAI_API_KEY set"
    model = json.loads(proc.stdout)["model"]
    assert model["model"] == "openai:gpt-5-mini" and model["embedded"] is False
    assert model["key_env"] == "OPENAI_API_KEY" and model["key_set"] is True


@needs_layers
def test_a_configured_model_without_its_key_says_not_set(tmp_path: Path) -> None:
    config = tmp_path / "doctor.toml"
    config.write_text('model = "anthropic:claude-x"\nsub_model = "openai:gpt-x"\n')
    proc = doctor(tmp_path, "--config", str(config))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert line(proc.stdout, "model:") == "model: anthropic:claude-x"
    assert line(proc.stdout, "sub-model:") == "sub-model: openai:gpt-x"
    assert line(proc.stdout, "key:") == "key: ANTHROPIC_API_KEY not set"


@needs_layers
def test_no_key_and_no_model_names_the_embedded_demo_model(tmp_path: Path) -> None:
    from rlmx.lm.llama_cpp import demo_model_available

    out = json.loads(doctor(tmp_path, "--json").stdout)["model"]
    if demo_model_available():
        assert out["embedded"] is True and out["model"] == "local:smollm2" and out["error"] is None
    else:
        assert out["model"] is None and "no model configured" in out["error"]


@needs_layers
def test_without_user_namespaces_the_default_falls_back_to_landlock(tmp_path: Path) -> None:
    proc = doctor(tmp_path, env={SIMULATE_ENV: "unavailable"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert line(proc.stdout, "user namespaces:") == (
        "user namespaces: unavailable: user namespaces are not permitted (simulated)"
    )
    assert "sandbox: process -> layer landlock" in proc.stdout
    assert "not permitted (simulated)" in line(proc.stdout, "not namespaces:")
    assert (
        proc.stdout.strip().splitlines()[-1] == "rlmx doctor: model code runs isolated here (layer landlock)"
    )


@needs_layers
def test_a_named_layer_the_host_cannot_build_is_exit_1_with_the_reason(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--sandbox", "process-namespaces", env={SIMULATE_ENV: "unavailable"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "sandbox: did not start: no user namespaces" in proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("rlmx doctor: model code cannot run isolated here: no user namespaces (")
    assert "--sandbox process-unisolated runs it with reduced isolation" in proc.stderr
    assert "--sandbox process would use layer landlock here" in proc.stderr
    assert "`" not in proc.stderr  # library names became flags


@needs_layers
def test_the_unisolated_backend_reaches_everything_and_exits_1(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--sandbox", "process-unisolated")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "sandbox: process-unisolated -> layer none" in proc.stdout
    assert "REACHABLE" in line(proc.stdout, "network:")
    assert "REACHABLE" in line(proc.stdout, "home (")
    assert "REACHABLE" in line(proc.stdout, "processes:")
    if os.path.exists("/etc/shadow"):
        assert "REACHABLE" in line(proc.stdout, "/etc/shadow:")
    (reason,) = proc.stderr.strip().splitlines()
    assert reason.startswith("rlmx doctor: model code cannot run isolated here: --sandbox process-unisolated")
    assert "a cell reached: network, home (" in reason
    out = json.loads(doctor(tmp_path, "--sandbox", "process-unisolated", "--json").stdout)
    assert out["layer"] == "none" and out["isolated"] is False and out["reason"] in reason
    assert not out["probes"]["network"]["blocked"] and not out["probes"]["home"]["blocked"]


@needs_layers
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--sandbox", "bogus"), "--sandbox: unknown backend 'bogus'"),
        (("--config", "/no/such/doctor.toml"), "config file not found"),
        (("--bogus",), "No such option: --bogus"),
    ],
)
def test_bad_options_are_exit_2(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    proc = doctor(tmp_path, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("rlmx: error: ") and says in proc.stderr and proc.stderr.count("\n") == 1


# --- the host's side of the verdicts, without a worker ---------------------------------------------


@pytest.fixture()
def host() -> Iterator[Host]:
    found = Host()
    yield found
    found.close()


def test_a_connection_that_arrives_is_reachable_whatever_the_cell_says(host: Host) -> None:
    import socket

    assert host.judge("network", {"connected": False, "error": "x"}).blocked is True
    with socket.create_connection(("127.0.0.1", host.port), timeout=2):
        probe = host.judge("network", {"connected": False, "error": "x"})
    assert probe.blocked is False and probe.detail.startswith("REACHABLE: a connection arrived")
    assert host.judge("network", {"connected": True}).blocked is False


def test_the_doctors_pid_in_another_pid_namespace_is_another_process(host: Host) -> None:
    other = {"signalled": True, "listed": True, "count": 2, "start": "1"}
    assert host.start is not None and host.start != "1"
    assert host.judge("processes", other).blocked is True
    assert host.judge("processes", {**other, "start": host.start}).blocked is False
    assert host.judge("processes", {**other, "start": None}).blocked is False  # cannot tell: reachable
    denied = {"kill_error": "PermissionError: x", "list_error": "PermissionError: y", "start": None}
    assert host.judge("processes", denied).blocked is True


def test_home_is_reachable_only_as_the_same_directory(host: Host) -> None:
    st = os.stat(host.home)
    assert host.judge("home", {"id": [st.st_dev, st.st_ino], "entries": 3}).blocked is False
    assert host.judge("home", {"id": [st.st_dev + 1, st.st_ino], "entries": 1}).blocked is True
    assert host.judge("home", {"error": "PermissionError: x"}).blocked is True
    assert host.judge("home", {"error": "PermissionError: x", "read": True}).blocked is False
