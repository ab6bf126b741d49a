"""The ray executor: each item an attempt at a time as a Ray task on some node of a cluster, the batch's
`Fleet` (ledger and rate limiters) in one Ray actor on the head node that every worker asks before each
model call. Needs `pip install 'rlmx[ray]'`; see docs/scaling.md.

API keys reach the workers in the job's `runtime_env` environment, sealed: Ray's runtime-env agent writes
every job's runtime_env to its log at INFO level, so the variables (`Plan.env`) travel as one value XORed
with a one-time pad of the same length, and the pad lives only in the fleet actor's memory; a worker
unseals them into its own environment before its first item (`unseal_env`). Keys are never in task
arguments, results or logs.

A task lost with its worker or node is reported to the driver as `lost`: the driver books its calls in
flight at their estimates (`Fleet.abandon`) and runs the item again elsewhere."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import secrets
import socket
import uuid
from pathlib import Path
from typing import Any

from rlmx.batch import shipping
from rlmx.batch.executor import Contexts, Finished, Plan, Worker
from rlmx.batch.fleet import BatchLimits, Fleet, RateSpec
from rlmx.batch.items import BatchItem
from rlmx.batch.shipping import Shipped, pack, unpack
from rlmx.errors import ConfigError

ray: Any
try:
    import ray
    import ray.exceptions
except ImportError:  # pragma: no cover - the extra is installed in dev and CI
    ray = None

HEAD_RESOURCE = "node:__internal_head__"  # every Ray cluster's head node has this resource
SEALED_ENV = "RLMX_SEALED_ENV"  # the runtime_env variable holding the sealed keys


def seal(env: dict[str, str]) -> tuple[str, bytes]:
    """(the sealed text for the runtime_env, the pad that opens it)."""
    data = json.dumps(env).encode("utf-8")
    pad = secrets.token_bytes(len(data))
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, pad, strict=True))).decode("ascii"), pad


def unseal(sealed: str, pad: bytes) -> dict[str, str]:
    data = base64.b64decode(sealed)
    opened: dict[str, str] = json.loads(bytes(a ^ b for a, b in zip(data, pad, strict=True)).decode("utf-8"))
    return opened


def unseal_env(actor: Any, plan: Plan) -> None:
    """Put the batch's keys into this worker's environment (see the module's docstring): sealed in the
    job's runtime_env, or in the plan when the driver was connected to Ray before the batch began."""
    sealed = os.environ.pop(SEALED_ENV, None) or plan.sealed_env
    if sealed:
        os.environ.update(unseal(sealed, ray.get(actor.pad.remote())))


class FleetActor:
    """The batch's one `Fleet`, in a Ray actor (no CPU; on the head node, which outlives worker nodes)."""

    def __init__(self, limits: BatchLimits, rates: dict[str, RateSpec], window_s: float, pad: bytes) -> None:
        self.fleet = Fleet(limits, rates, window_s=window_s)
        self._pad = pad

    def pad(self) -> bytes:
        return self._pad

    def admit(self, item: str, attempt: int) -> str | None:
        return self.fleet.admit(item, attempt)

    def reserve(self, item: str, attempt: int, **call: Any) -> tuple[int | None, str | None]:
        return self.fleet.reserve(item, attempt, **call)

    def settle(self, grant: int, **used: Any) -> None:
        self.fleet.settle(grant, **used)

    def finish(self, item: str, attempt: int) -> None:
        self.fleet.finish(item, attempt)

    def abandon(self, item: str, attempt: int) -> int:
        return self.fleet.abandon(item, attempt)

    def rate_acquire(self, model: str, tokens: int) -> tuple[int | None, float]:
        return self.fleet.rate_acquire(model, tokens)

    def rate_settle(self, rid: int, tokens: int) -> None:
        self.fleet.rate_settle(rid, tokens)

    def totals(self) -> dict[str, Any]:
        return self.fleet.totals()


class RayFleetClient:
    """A worker's way to the fleet actor; what needs no answer is sent without waiting."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def reserve(self, item: str, attempt: int, **call: Any) -> tuple[int | None, str | None]:
        granted: tuple[int | None, str | None] = await self.actor.reserve.remote(item, attempt, **call)
        return granted

    def settle(self, grant: int, *, tokens: int, cost_usd: float | None, made: bool) -> None:
        self.actor.settle.remote(grant, tokens=tokens, cost_usd=cost_usd, made=made)

    async def rate_acquire(self, model: str, tokens: int) -> tuple[int | None, float]:
        got: tuple[int | None, float] = await self.actor.rate_acquire.remote(model, tokens)
        return got

    def rate_settle(self, rid: int, tokens: int) -> None:
        self.actor.rate_settle.remote(rid, tokens)


_RUNNERS: dict[str, Worker] = {}  # in each worker process: the batch's worker (its RLMs, by setting)


def run_attempt(
    batch_id: str, plan: Plan, actor: Any, item: Any, shipped: Shipped, attempt: int
) -> dict[str, Any]:
    """The Ray task: one attempt of one item on this node."""
    from rlmx.engine.threads import UnwaitedExecutor
    from rlmx.paths import state_dir

    runner = _RUNNERS.get(batch_id)
    if runner is None:
        from rlmx.mcp.run import close_pools

        close_pools()  # the previous batch's MCP servers in this worker process
        _RUNNERS.clear()  # one batch at a time per worker process
        unseal_env(actor, plan)
        node = ray.get_runtime_context().get_node_id()
        runner = _RUNNERS[batch_id] = plan.worker(plan, RayFleetClient(actor), node)
    context = unpack(shipped, Path(state_dir()) / "batch-contexts")

    async def main() -> dict[str, Any]:
        asyncio.get_running_loop().set_default_executor(UnwaitedExecutor())
        return await runner.run(item, context, attempt)

    return asyncio.run(main())


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        if ray is None:
            raise ConfigError(
                "the ray executor needs Ray: pip install 'rlmx[ray]' (on the driver and on every node)"
            )
        self.address = address
        self.refs: dict[Any, tuple[BatchItem, int]] = {}
        self.shipped: dict[str, Any] = {}  # context key -> object ref
        self.by_hash: dict[str, Any] = {}  # content hash -> object ref
        self.started_ray = False
        self.actor: Any = None
        self.pad = b""  # opens the sealed keys (none when this process was connected to Ray already)

    @property
    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def start(self, plan: Plan) -> None:
        self.plan = plan
        # each setting's spec as data: no API key in it (a key set in its options travels sealed)
        secrets: dict[str, str] = {}
        specs = {key: spec.to_data(secrets) for key, spec in plan.specs.items()}
        env = {**plan.env, **secrets}
        sealed, self.pad = seal(env) if env else ("", b"")
        in_plan = ""  # the sealed keys travel in the plan only when the job's runtime_env is not ours
        if ray.is_initialized():
            in_plan = sealed
        else:
            options: dict[str, Any] = {"namespace": "rlmx", "log_to_driver": False}
            if sealed:  # the keys: in the job's environment, sealed; never in task arguments
                options["runtime_env"] = {"env_vars": {SEALED_ENV: sealed}}
            if self.address is None:  # a local Ray instance, started here and stopped at the end
                options["include_dashboard"] = False
            check_reachable(self.address)
            try:
                ray.init(address=self.address, **options)
            except (
                Exception
            ) as exc:  # Ray's own errors for a cluster it cannot join: one line, the cause kept
                if ray.is_initialized():
                    ray.shutdown()
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
                raise ConfigError(f"cannot start or reach {where}: {first_line(exc)}") from exc
            self.started_ray = True
        from rlmx.mcp.nodes import check_ray_nodes  # a stdio MCP server's command must be on every node

        check_ray_nodes([data.get("mcp_servers") for data in specs.values()])
        self.batch_id = uuid.uuid4().hex[:12]
        self.actor = (
            ray.remote(FleetActor)
            .options(num_cpus=0, resources={HEAD_RESOURCE: 0.001}, max_restarts=0)
            .remote(plan.limits, plan.rates, plan.rate_window_s, self.pad)
        )
        # what every task needs of the plan: not the driver's loaded contexts, nor the keys
        self.plan_ref = ray.put(
            dataclasses.replace(plan, specs=specs, contexts=Contexts({}), env={}, sealed_env=in_plan)
        )
        self.task = ray.remote(run_attempt).options(  # SPREAD: items go to every node, not the driver's first
            num_cpus=plan.cpus_per_item, max_retries=0, retry_exceptions=False, scheduling_strategy="SPREAD"
        )

    def _shipped(self, item: BatchItem) -> Any:
        key = item.context_key()
        if key not in self.shipped:
            shipped = pack(self.plan.contexts.context(item), max_bytes=shipping.SHIP_MAX_BYTES)
            if shipped.key and shipped.key in self.by_hash:
                self.shipped[key] = self.by_hash[shipped.key]
            else:
                ref = ray.put(shipped)
                self.shipped[key] = ref
                if shipped.key:
                    self.by_hash[shipped.key] = ref
        return self.shipped[key]

    def admit(self, item: BatchItem, attempt: int) -> str | None:
        refusal: str | None = ray.get(self.actor.admit.remote(item.key, attempt))
        return refusal

    def finish(self, item: BatchItem, attempt: int) -> None:
        self.actor.finish.remote(item.key, attempt)

    def abandon(self, item: BatchItem, attempt: int) -> None:
        ray.get(self.actor.abandon.remote(item.key, attempt))

    def submit(self, item: BatchItem, attempt: int) -> None:
        ref = self.task.remote(self.batch_id, self.plan_ref, self.actor, item, self._shipped(item), attempt)
        self.refs[ref] = (item, attempt)

    def running(self) -> int:
        return len(self.refs)

    def wait(self, timeout: float) -> list[Finished]:
        if not self.refs:
            return []
        ready, _ = ray.wait(list(self.refs), num_returns=1, timeout=timeout)
        if ready:  # and whatever else is done by now
            ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0)
        finished = []
        for ref in ready:
            item, attempt = self.refs.pop(ref)
            try:
                finished.append(Finished(item, attempt, record=ray.get(ref)))
            except ray.exceptions.RayTaskError as exc:  # our code raised outside the run (a bug): loud
                cause = exc.cause if exc.cause is not None else exc
                finished.append(Finished(item, attempt, record=_crash_record(item, attempt, cause)))
            except ray.exceptions.RayError as exc:  # the worker or its node died: lost, retried
                finished.append(Finished(item, attempt, lost=f"{type(exc).__name__}: {first_line(exc)}"))
        return finished

    def totals(self) -> dict[str, Any]:
        if self.actor is None:  # never started
            return {}
        totals: dict[str, Any] = ray.get(self.actor.totals.remote())
        return totals

    def close(self) -> None:
        for ref in self.refs:
            ray.cancel(ref, force=True)
        self.refs.clear()
        if self.actor is not None:
            ray.kill(self.actor)
            self.actor = None
        if self.started_ray:
            ray.shutdown()


def check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """Refuse at once an --address where nothing listens (Ray itself retries for minutes)."""
    if not address or address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"`address`={address!r}: write auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}; is `ray start --head` running "
            "there? (the head prints its address)"
        ) from None


def _crash_record(item: BatchItem, attempt: int, exc: BaseException) -> dict[str, Any]:
    from rlmx.batch.item_run import failed_record

    return failed_record(item, f"{type(exc).__name__}: {first_line(exc)}", attempts=attempt, node=None)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["FleetActor", "RayExecutor"]
