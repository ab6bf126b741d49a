"""`rlmx doctor`: what this host offers for isolating model-written code, the layer a run would really
get (a real worker is started), a live probe from inside it, and the model a run would use. Exit 0:
model code runs isolated here; 1: it does not (the reason is the last line); 2: bad options."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rlmx.commands.options import ConfigFile, Json, Mcp

if TYPE_CHECKING:
    from rlmx.commands.doctor_probes import Live
    from rlmx.sandbox.probe import HostSupport

ISOLATED_LAYERS = ("namespaces", "landlock")
REDUCED = "--sandbox process-unisolated runs it with reduced isolation"

DoctorSandbox = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="The sandbox backend to check: process (the default: the layer a run picks), process-namespaces, "
        "process-landlock, process-unisolated or local. Default: the config file's sandbox backend, else process.",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    app.command()(doctor)


def doctor(
    as_json: Json = False,
    sandbox: DoctorSandbox = None,
    config_file: ConfigFile = None,
    mcp: Mcp = [],  # noqa: B006
) -> None:
    """Say what this host offers for isolating model code, and whether a run would work here.

    Starts a real worker of the sandbox a run would use, runs one cell in it that tries to reach the
    network, your home directory, other processes and /etc/shadow, and shows the model a run would
    use (never a key); with --mcp (or the config's mcp), starts each MCP server as a run would and
    counts its tools (a server that does not start is reported; the exit code is about isolation).
    Exit 0: model code runs isolated; 1: it does not (the reason is the last line); 2: bad options;
    130: interrupted."""
    from rlmx.config import load_config

    cfg = load_config(config_file)
    settings = sandbox_settings(sandbox, cfg.sandbox)
    host, live, failure = asyncio.run(_gather(settings))
    model = model_report(cfg)
    reason = verdict(host, settings.backend, live, failure)
    mcp_files = [*cfg.mcp, *(str(p.expanduser().resolve()) for p in mcp)]
    mcp_report = []
    if mcp_files:
        from rlmx.mcp.nodes import doctor_report

        mcp_report = doctor_report(mcp_files)
    data = {
        "host": host.to_data(),
        "sandbox": settings.backend,
        "layer": live.isolation.get("layer") if live else None,
        "worker_ids": live.isolation.get("worker_ids") if live else None,
        "landlock_abi": live.isolation.get("landlock_abi") if live else None,
        "seccomp": live.isolation.get("seccomp") if live else None,
        "unavailable": dict(live.isolation.get("unavailable", {})) if live else {},
        "notes": list(live.isolation.get("notes", [])) if live else [],
        "probes": {name: probe.to_data() for name, probe in live.probes.items()} if live else {},
        "model": model,
        "isolated": reason is None,
        "reason": reason,
        "mcp": mcp_report,
    }
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False))
    else:
        from rlmx.mcp.nodes import doctor_lines

        typer.echo("\n".join([*text_report(host, live, failure, model), *doctor_lines(mcp_report)]))
    if reason is not None:
        sys.stderr.write(f"rlmx doctor: model code cannot run isolated here: {reason}\n")
        raise typer.Exit(1)
    if not as_json:
        typer.echo(f"rlmx doctor: model code runs isolated here (layer {data['layer']})")


def sandbox_settings(backend: str | None, table: dict[str, Any]) -> Any:
    """The sandbox a run would use (as rlmx.spec.options.sandbox_settings builds it), without refusing
    a named layer this host lacks: finding that out is the doctor's job."""
    from rlmx.errors import InvalidSettings
    from rlmx.sandbox.base import SandboxSettings

    values = {**table, "backend": backend or table.get("backend") or "process"}
    try:
        return SandboxSettings(**values)
    except InvalidSettings as exc:
        raise InvalidSettings(str(exc).replace("SandboxSettings: ", "`sandbox`: ")) from exc


async def _gather(settings: Any) -> tuple[HostSupport, Live | None, str | None]:
    """The host's support (a small subprocess) while the worker starts and is probed."""
    from rlmx.commands.doctor_probes import live
    from rlmx.errors import SandboxError
    from rlmx.sandbox.probe import host_support

    support = asyncio.create_task(asyncio.to_thread(host_support))
    try:
        found: Live | None = await live(settings)
        failure = None
    except SandboxError as exc:
        found, failure = None, failure_reason(exc)
    return await support, found, failure


def failure_reason(exc: Exception) -> str:
    """The sandbox's refusal in one line, in the command line's terms, without its own hint to run
    the doctor."""
    from rlmx.commands.run_options import cli_terms
    from rlmx.errors import SandboxUnavailable

    message = " ".join(str(exc).split())
    if isinstance(exc, SandboxUnavailable):
        message = message.split("; to run model code with reduced isolation", 1)[0]
        message = message.removeprefix("cannot isolate model code here:").strip()
        message = f"{message}; {REDUCED}"
    return cli_terms(message)


def verdict(host: HostSupport, backend: str, live: Live | None, failure: str | None) -> str | None:
    """None when model code runs isolated (an isolating layer, every probe blocked); else why not."""
    other = f"--sandbox process would use layer {host.default_layer} here" if host.default_layer else None
    if live is None:
        failed = failure or "the sandbox did not start"
        return f"{failed}; {other}" if other and backend != "process" else failed
    layer = live.isolation.get("layer")
    reachable = [name_of(name, live) for name, probe in live.probes.items() if not probe.blocked]
    if layer in ISOLATED_LAYERS:
        if not reachable:
            return None
        return f"layer {layer}, yet a cell reached: {', '.join(reachable)}"
    why: list[str] = []
    if host.user_namespaces_missing:
        why.append(f"no user namespaces ({host.user_namespaces_missing})")
    if host.landlock_layer_missing:
        why.append(f"no Landlock layer ({host.landlock_layer_missing})")
    if live.backend == "local":
        chosen = "--sandbox local runs model code inside this process (UNSAFE)"
    else:
        chosen = f"--sandbox {live.backend} runs model code with reduced isolation (layer none)"
    if other:
        why.append(other)
    reached = f"; a cell reached: {', '.join(reachable)}" if reachable else ""
    return "; ".join([chosen, *why]) + reached


def name_of(name: str, live: Live) -> str:
    if name == "home":
        return f"home ({live.probes[name].extra.get('path')})"
    return "/etc/shadow" if name == "shadow" else name


# --- the model a run would use ------------------------------------------------------------------------


def model_report(cfg: Any) -> dict[str, Any]:
    """The models `rlmx ask` would use without --model (rlmx.config.choose_models), where they
    connect, and whether the root model's key is set: the variable's name, never the key."""
    from rlmx.config import choose_models
    from rlmx.errors import ConfigError
    from rlmx.lm.registry import provider_of

    out: dict[str, Any] = {"model": None, "sub_model": None, "base_url": None, "embedded": False}
    out.update({"key_env": None, "key_set": False, "key_needed": True, "error": None})
    try:
        choice = choose_models(None, None, cfg)
    except ConfigError as exc:
        from rlmx.commands.run_options import cli_terms

        out["error"] = cli_terms(str(exc))
        return out
    out.update(model=choice.model, sub_model=choice.sub_model or choice.model, embedded=choice.embedded)
    record = provider_of(choice.model)
    provider = choice.model.partition(":")[0]
    section = cfg.providers.get(provider, {})
    base = section.get("base_url")
    if base is None and record is not None:
        base = (os.environ.get(record.base_env) if record.base_env else None) or record.base_url
    out["base_url"] = base
    if record is not None and record.local:
        out.update(key_needed=False)
        return out
    if section.get("api_key_env"):
        out.update(key_env=section["api_key_env"], key_set=bool(os.environ.get(section["api_key_env"])))
    elif section.get("api_key"):
        out.update(key_env=None, key_set=True, key_source="config file")
    elif record is not None and record.key_envs:
        found = record.key_from(os.environ)
        out.update(key_env=found[0] if found else record.key_envs[0], key_set=found is not None)
    else:
        out.update(key_needed=False)
    return out


def model_lines(model: dict[str, Any]) -> list[str]:
    if model["error"]:
        return [f"  model: none: {model['error']}"]
    if model["embedded"]:
        return [
            f"  model: {model['model']}: the embedded demo model would be used (no key and no model "
            "configured; a tiny demo model, run in this process)"
        ]
    lines = [f"  model: {model['model']}", f"  sub-model: {model['sub_model']}"]
    if model["base_url"]:
        lines.append(f"  base URL: {model['base_url']}")
    if not model["key_needed"]:
        lines.append("  key: none needed")
    elif model["key_env"]:
        lines.append(f"  key: {model['key_env']} {'set' if model['key_set'] else 'not set'}")
    else:
        lines.append(f"  key: {'set' if model['key_set'] else 'not set'} in the config file")
    return lines


# --- the report as text ---------------------------------------------------------------------------------


def host_lines(host: HostSupport) -> list[str]:
    ll = f"ABI {host.landlock_abi}" if host.landlock_missing is None else f"absent: {host.landlock_missing}"
    if host.landlock_missing is None and host.landlock_layer_missing:
        ll += f" (the layer is not picked by default: {host.landlock_layer_missing})"
    if not host.root:
        root = f"no (uid {os.geteuid()}): workers share this uid (without capabilities)"
    elif host.per_worker_uid:
        root = "yes: each worker gets a uid of its own"
    else:
        root = "yes, without CAP_SETUID/CAP_SETGID/CAP_SETPCAP: workers of the Landlock layer share uid 0's"
    return [
        "host:",
        f"  user namespaces: {_missing(host.user_namespaces_missing)}",
        f"  Landlock: {ll}",
        f"  seccomp: {_missing(host.seccomp_missing, 'available (libseccomp; filters load)')}",
        f"  root: {root}",
        f"  cgroups: {host.cgroups} (for information)",
    ]


def _missing(why: str | None, present: str = "available") -> str:
    return present if why is None else f"unavailable: {why}"


def text_report(
    host: HostSupport, live: Live | None, failure: str | None, model: dict[str, Any]
) -> list[str]:
    lines = host_lines(host)
    if live is None:
        lines.append(f"sandbox: did not start: {failure}")
    else:
        iso = live.isolation
        seccomp = "loaded" if iso.get("seccomp") else "not loaded"
        lines.append(
            f"sandbox: {live.backend} -> layer {iso.get('layer') or 'none'} "
            f"(worker ids: {iso.get('worker_ids')}; seccomp filter: {seccomp})"
        )
        for layer, why in dict(iso.get("unavailable", {})).items():
            lines.append(f"  not {layer}: {why}")
        lines.extend(f"  note: {note}" for note in iso.get("notes", []))
        lines.append("probes (one cell in that worker):")
        for name, probe in live.probes.items():
            lines.append(f"  {name_of(name, live)}: {probe.detail}")
    lines.append("models (as `rlmx ask` would choose them, without --model):")
    lines.extend(model_lines(model))
    return lines
