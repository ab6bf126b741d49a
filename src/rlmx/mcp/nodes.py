"""Checks that the configured MCP servers can start where runs will run: `rlmx doctor` on this host,
and a batch's preflight on every node of a Ray cluster (a stdio server's command must exist on each)."""

from __future__ import annotations

import os
import shutil
import socket
from typing import Any

from rlmx.errors import ConfigError

NODE_CHECK_TIMEOUT_S = 120.0


def command_found(command: str, path: str | None = None) -> bool:
    if os.sep in command:
        return os.path.isfile(command) and os.access(command, os.X_OK)
    return shutil.which(command, path=path) is not None


def missing_here(sources: Any) -> list[str]:
    """One line per configured stdio server whose command is not on this host (or whose `${VAR}`s are
    not set here)."""
    from rlmx.mcp.config import load_servers

    try:
        servers = load_servers(sources)
    except ConfigError as exc:
        return [str(exc)]
    return [
        f"MCP server {s.name!r}: the command {s.command!r} is not found here (PATH)"
        for s in servers
        if s.command is not None and not command_found(s.command)
    ]


def _on_node(sources_list: list[Any]) -> tuple[str, list[str]]:
    found: list[str] = []
    for sources in sources_list:
        found += missing_here(sources)
    return socket.gethostname(), list(dict.fromkeys(found))


def check_ray_nodes(sources_list: list[Any]) -> None:
    """On every alive node of the connected Ray cluster: ConfigError naming the first node and server
    whose command is missing there."""
    sources_list = [s for s in sources_list if s]
    if not sources_list:
        return
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(_on_node)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [
        task.options(
            num_cpus=0,
            max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
        ).remote(sources_list)
        for n in nodes
    ]
    try:
        results = ray.get(refs, timeout=NODE_CHECK_TIMEOUT_S)
    except Exception as exc:  # a node that cannot run the check: one line
        raise ConfigError(
            f"could not check the MCP servers on every Ray node: {type(exc).__name__}: {exc}"
        ) from None
    for host, missing in results:
        if missing:
            raise ConfigError(
                f"on Ray node {host}: {missing[0]}; install it on every node (rlmx doctor checks one host)"
            )


def doctor_report(sources: Any) -> list[dict[str, Any]]:
    """Each configured server started here (as a run would start it), its tools counted, then stopped:
    one entry per server with `server`, `transport`, `ok`, `tools` and `error`."""
    from rlmx.mcp.client import McpHub
    from rlmx.mcp.config import load_servers

    servers = load_servers(sources)
    hub = McpHub(servers, say=lambda _line: None)
    try:
        hub.start()
        report = []
        for server in servers:
            conn = hub.connections[server.name]
            error = conn.dead
            if error is None and server.command is not None and not command_found(server.command):
                error = "its command is not found here (PATH)"
            report.append(
                {
                    "server": server.name,
                    "transport": server.transport,
                    "ok": error is None,
                    "tools": len(conn.tools) if error is None else 0,
                    "error": error,
                }
            )
        return report
    finally:
        hub.close()


def doctor_lines(report: list[dict[str, Any]]) -> list[str]:
    return [
        f"MCP server {r['server']!r} ({r['transport']}): "
        + (f"starts, {r['tools']} tools" if r["ok"] else f"does not start: {r['error']}")
        for r in report
    ]
