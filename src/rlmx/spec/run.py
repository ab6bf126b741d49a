"""`RunSpec`: a run described once, in library names.

Every front end (the Python keyword constructor of `RLM`, the command line's flags, the config file,
`rlmx serve`/`rlmx mcp` profile tables, a batch line's overrides, eval's options) becomes one of these;
an `RLM` is built from one and `rlm.spec` is a snapshot of its current fields. Defaults and validation
live here and in the settings objects it holds (`Limits`, `SandboxSettings`, `HistorySettings`,
`ModelOptions`).

A spec has a data part and attachments. The data part round-trips through JSON (`to_data` /
`from_data`) and pickles: model strings (or `ModelRef`s: a model string and how to reach it), the
settings objects, the prompt profile's name, tools as `MODULE:ATTR` references, a JSON schema, the trace
and cache settings. Attachments are runtime objects: LM objects, tool callables, a pricer, a cache
object, event sinks. `record()` describes a spec for a trace (attachments by name, never a secret);
`to_data()` is for crossing processes and refuses an attachment that has no reference. Neither ever
holds an API key: a key set in the options is taken out into `secrets` (the caller ships it sealed)
and named by an environment variable that the receiving side reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.limits import HistorySettings, Limits
from rlmx.lm.options import ModelOptions
from rlmx.sandbox.base import SandboxSettings
from rlmx.spec.base import ModelRef, SpecError
from rlmx.spec.data import spec_from_data, spec_to_data
from rlmx.tools import TOOL_MAX_BYTES, TOOL_TIMEOUT_S


@dataclass
class RunSpec:
    """How a run is made: its models, limits, sandbox, history, prompt, tools, output, trace and cache.

    `model` / `sub_model` / `models_by_depth` values are model strings (`provider:model`, reached with
    `model_options`, or `sub_model_options` for the sub-model and depths >= 1), `ModelRef`s, or LM
    objects (attachments). `tools` / `sub_tools`: a dict (name -> callable, JSON value, `Tool`), a list,
    a `ToolSet`, or `MODULE:ATTR` strings (data). `output`: a default output schema for runs that give
    none (a JSON schema dict, a pydantic type, an `OutputSpec`)."""

    model: Any  # str | ModelRef | LM
    sub_model: Any = None
    limits: Limits = field(default_factory=Limits)
    trace: bool | str | Path | None = True  # True: a new file under the state dir; a path; False/None: off
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    models_by_depth: dict[int, Any] = field(default_factory=dict)
    model_options: ModelOptions = field(default_factory=ModelOptions)
    # how the sub-model and the depths >= 1 given as strings are reached; None: `model_options`
    sub_model_options: ModelOptions | None = None
    pricer: Any = None  # None: genai-prices; rlmx.pricing.Pricing(overrides) adds prices
    on_event: Any = None  # a sink (callable taking an Event) or a list of them
    excerpt_chars: int = 2_000  # cap of message excerpts in the trace; 0 keeps whole texts
    allow_unpriced: bool = False  # with max_cost_usd: run even when a model has no known price
    cache: Any = None  # True: the default file; a path; a ResponseCache; None/False: off
    # "bm25:50": narrow the context to the 50 chunks that best match the question first (also
    # "vector:K", "hybrid:K"; see rlmx.context.prefilter); None: the model sees the whole context
    prefilter: Any = None
    # a context that was given but holds no usable text is refused before any model call, unless True
    allow_empty_context: bool = False
    # the prompt profile: "rlmx", "official" or a template file's path (or a PromptProfile)
    prompt: Any = "rlmx"
    system_prompt_append: str = ""
    tools: Any = None
    sub_tools: Any = None
    tool_timeout_s: float = TOOL_TIMEOUT_S
    tool_max_bytes: int = TOOL_MAX_BYTES
    output: Any = None
    # MCP servers whose tools the REPL gets: an `mcpServers` JSON file's path, a dict of that form, or a
    # list of them (rlmx.mcp; started for each run, or once for a session)
    mcp_servers: Any = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Refuse values of the wrong kind, naming the field (the settings objects check themselves)."""
        kinds: dict[str, tuple[type, ...]] = {
            "limits": (Limits,),
            "sandbox": (SandboxSettings,),
            "history": (HistorySettings,),
            "model_options": (ModelOptions,),
        }
        for name, kind in kinds.items():
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(
                    f"{name} must be a {kind[0].__name__}, not {type(getattr(self, name)).__name__}"
                )
        if self.sub_model_options is not None and not isinstance(self.sub_model_options, ModelOptions):
            raise ConfigError("sub_model_options must be a ModelOptions or None")
        if self.model is None:
            raise ConfigError("model is required: a provider:model string or an LM object")
        if not isinstance(self.models_by_depth, Mapping):
            raise ConfigError("models_by_depth must be a dict: depth -> model")
        if not isinstance(self.excerpt_chars, int) or self.excerpt_chars < 0:
            raise ConfigError("excerpt_chars must be an int >= 0 (0 keeps whole texts)")
        if not isinstance(self.system_prompt_append, str):
            raise ConfigError("system_prompt_append must be a string")
        servers = self.mcp_servers
        entries = servers if isinstance(servers, (list, tuple)) else [servers]
        if servers is not None and not all(isinstance(e, (str, Path, Mapping)) for e in entries):
            raise ConfigError(
                "mcp_servers must be an `mcpServers` JSON file's path, a dict, or a list of them"
            )

    # --- copies --------------------------------------------------------------------------------------

    def fields(self) -> dict[str, Any]:
        """The spec's fields by name (what `RLM(**spec.fields())` takes)."""
        return {f.name: getattr(self, f.name) for f in fields(RunSpec)}

    def snapshot(self) -> RunSpec:
        """A spec of these fields as they are now (a run reads one, so later assignments wait for the
        next run)."""
        return RunSpec(**self.fields())

    def replace(self, **changes: Any) -> RunSpec:
        """A copy with `changes` (field names); `limits` may be a dict of Limits fields to change."""
        unknown = sorted(set(changes) - {f.name for f in fields(RunSpec)})
        if unknown:
            raise ConfigError(f"unknown spec field {unknown[0]!r}; known: {', '.join(field_names())}")
        if isinstance(changes.get("limits"), Mapping):
            changes["limits"] = limits_with(self.limits, changes["limits"])
        return RunSpec(**{**self.fields(), **changes})

    # --- data ----------------------------------------------------------------------------------------

    def to_data(self, secrets: dict[str, str] | None = None) -> dict[str, Any]:
        """The spec as JSON-able data, to cross processes. An attachment without a reference (an LM
        object, a tool that is a closure, a pricer, a cache object) is refused with SpecError naming
        it; event sinks stay behind. An API key set in the options goes into `secrets` (environment
        variable name -> key; without `secrets` it is refused) and the data names that variable."""
        return spec_to_data(self, secrets, describe=False)

    def record(self) -> dict[str, Any]:
        """The spec as a trace records it (`run_start`): the data, attachments by name, no secret."""
        return spec_to_data(self, None, describe=True)

    def __reduce__(self) -> Any:
        """A spec pickles as its data (so never with a key in it); an RLM as itself."""
        if type(self) is not RunSpec:
            return super().__reduce__()
        return (RunSpec.from_data, (self.to_data(),))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunSpec:
        """The spec `to_data` made (API keys read from the environment variables it names)."""
        return cls(**spec_from_data(data, [f.name for f in fields(cls)]))


def field_names() -> list[str]:
    return [f.name for f in fields(RunSpec)]


def limits_with(limits: Limits, changes: Mapping[str, Any]) -> Limits:
    """`limits` with `changes` (Limits field names); an unknown name is refused by name."""
    known = {f.name for f in fields(Limits)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ConfigError(f"unknown limit {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return dataclasses.replace(limits, **dict(changes))


__all__ = ["ModelRef", "RunSpec", "SpecError", "field_names", "limits_with"]
