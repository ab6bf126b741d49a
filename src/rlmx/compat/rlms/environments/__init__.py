"""The official environments as rlmx sandboxes. `local`, `ipython` and `docker` run model code in rlmx's
isolated worker (the default sandbox: a separate process with namespaces or Landlock + seccomp), said
once in a log line; `environment_kwargs={"isolated": False}` runs it in this process instead, as the
official `local` does. The remote sandboxes (`modal`, `e2b`, `daytona`, `prime`) are refused by name."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from rlmx.errors import InvalidSettings
from rlmx.sandbox.base import SandboxSettings
from rlmx.tools import Tool, ToolSet, check_name

log = logging.getLogger("rlmx.compat.rlms")

ISOLATED = ("local", "ipython", "docker")
REMOTE = ("modal", "e2b", "daytona", "prime")
RESERVED_TOOL_NAMES = frozenset(
    {
        "llm_query",
        "llm_query_batched",
        "rlm_query",
        "rlm_query_batched",
        "SHOW_VARS",
        "answer",
        "context",
        "history",
    }
)
OUTPUT_CHARS = 5_000_000  # a cell's printed output kept whole (the official keeps all of it)
_told: set[str] = set()


@dataclass(frozen=True)
class Environment:
    """What rlmx makes of `environment` and `environment_kwargs`."""

    sandbox: SandboxSettings
    setup_code: str | None = None
    isolated: bool = True
    ignored: tuple[str, ...] = field(default=())


def environment_of(environment: str, kwargs: dict[str, Any] | None) -> Environment:
    """The sandbox for `environment`; a remote one, or an unknown name, is refused in one line."""
    if environment in REMOTE:
        raise InvalidSettings(
            f"environment {environment!r} is a remote sandbox rlmx does not drive; rlmx runs model code in "
            "its own isolated worker on this machine: use environment='local' (isolated by default), or "
            "rlmx's batch runner (rlmx.batch, Ray) to spread runs over machines"
        )
    if environment not in ISOLATED:
        raise InvalidSettings(
            f"Unknown environment: {environment}. Supported: {list(ISOLATED + REMOTE)} "
            f"({', '.join(REMOTE)} are refused by rlmx.compat.rlms)"
        )
    kwargs = dict(kwargs or {})
    setup = kwargs.pop("setup_code", None)
    if setup is not None and not isinstance(setup, str):
        raise InvalidSettings("environment_kwargs['setup_code'] must be a string of Python code")
    isolated = kwargs.pop("isolated", True)
    if not isinstance(isolated, bool):
        raise InvalidSettings("environment_kwargs['isolated'] must be True or False")
    if isolated and environment not in _told:
        _told.add(environment)
        log.warning(
            "rlmx.compat.rlms: environment %r runs model code in rlmx's isolated sandbox (a separate "
            "worker process), not in this process; environment_kwargs={'isolated': False} runs it "
            "in-process as the official local environment does",
            environment,
        )
    if kwargs:
        log.info(
            "rlmx.compat.rlms: environment_kwargs %s are not used by rlmx's sandbox",
            ", ".join(sorted(kwargs)),
        )
    # the whole output comes back, as officially; the feedback cuts each block (StrictOfficialDialect)
    backend = "process" if isolated else "local"
    sandbox = SandboxSettings(backend=backend, output_chars=OUTPUT_CHARS)
    return Environment(sandbox, setup, isolated, tuple(sorted(kwargs)))


def tool_set(tools: dict[str, Any] | None, *, isolated: bool, role: str) -> ToolSet | None:
    """The official `custom_tools` dict (values, or `{"tool": value, "description": ...}`) as rlmx
    tools. Functions run on the host across the bridge; a value is copied into the REPL, so under
    isolation it must be JSON: anything else is refused naming the in-process environment."""
    if tools is None:
        return None
    if not isinstance(tools, dict):
        raise InvalidSettings(f"{role} must be a dict of name -> function or value")
    conflicts = sorted(set(tools) & RESERVED_TOOL_NAMES)
    if conflicts:
        raise InvalidSettings(
            f"Custom tools cannot override reserved REPL functions: {conflicts}. "
            f"Reserved names: {sorted(RESERVED_TOOL_NAMES)}"
        )
    out: dict[str, Tool] = {}
    for name, entry in tools.items():
        value, description = entry, None
        if isinstance(entry, dict) and "tool" in entry:
            value = entry["tool"]
            description = entry.get("description") if isinstance(entry.get("description"), str) else None
        check_name(name)
        if not callable(value) and isolated and not _is_json(value):
            raise InvalidSettings(
                f"{role}[{name!r}] is a {type(value).__name__}, which cannot cross into rlmx's isolated "
                "sandbox (a value is copied as JSON); make it a function, a JSON value, or run model code "
                'in this process with environment_kwargs={"isolated": False}'
            )
        out[name] = Tool(value, description=description, name=name)
    return ToolSet(out)


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


__all__ = ["ISOLATED", "REMOTE", "RESERVED_TOOL_NAMES", "Environment", "environment_of", "tool_set"]
