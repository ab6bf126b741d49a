"""A `RunSpec` as JSON-able data and back (see rlmx.spec.run for what is data and what is attached).

Two forms: `describe=False` is for crossing processes (an attachment without a reference is refused,
API keys go into a separate `secrets` mapping); `describe=True` is for the trace (attachments named, the
presence of a key said, never its value)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlmx.limits import HistorySettings, Limits
from rlmx.lm.options import ModelOptions
from rlmx.lm.retry import RetryPolicy
from rlmx.sandbox.base import SandboxSettings
from rlmx.spec.base import DATA_VERSION, SEALED_KEY_PREFIX, ModelRef, SpecError

# fields copied as they are (plain JSON values)
PLAIN = (
    "excerpt_chars",
    "allow_unpriced",
    "allow_empty_context",
    "system_prompt_append",
    "tool_timeout_s",
    "tool_max_bytes",
)
SETTINGS: dict[str, type] = {"limits": Limits, "sandbox": SandboxSettings, "history": HistorySettings}


class _Writer:
    def __init__(self, secrets: dict[str, str] | None, describe: bool) -> None:
        self.secrets = secrets
        self.describe = describe

    def attached(self, where: str, what: str, name: str) -> Any:
        """An attachment: named in a description, refused in data."""
        if self.describe:
            return {"attached": what, "name": name}
        raise SpecError(
            f"{where} is {what} ({name}), which cannot cross processes: give it as data instead "
            "(a model string or ModelRef, MODULE:ATTR tools, a JSON schema, a path)"
        )

    def options(self, options: ModelOptions | None, where: str) -> dict[str, Any] | None:
        if options is None:
            return None
        out: dict[str, Any] = {
            "base_url": options.base_url,
            "concurrency": options.concurrency,
            "timeout_s": options.timeout_s,
            "extra": dict(options.extra),
            "retry": dataclasses.asdict(options.retry),
            "requests_per_minute": options.requests_per_minute,
            "tokens_per_minute": options.tokens_per_minute,
            "temperature": options.temperature,
            "top_p": options.top_p,
            "reasoning_effort": options.reasoning_effort,
            "api_key_env": options.api_key_env,
        }
        if options.api_key and not (
            options.api_key_env and os.environ.get(options.api_key_env) == options.api_key
        ):
            out["api_key_env"] = self.key(options.api_key, where)
        if options.vision is not None:
            out["vision"] = options.vision
        return out

    def key(self, key: str, where: str) -> str | None:
        if self.describe:
            return "(a key set in the options)"
        if self.secrets is None:
            raise SpecError(
                f"{where} holds an API key, which a spec's data never carries: name it with "
                "api_key_env, or pass a `secrets` mapping to ship it sealed"
            )
        name = SEALED_KEY_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16].upper()
        self.secrets[name] = key
        return name

    def model(self, value: Any, where: str) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, ModelRef):
            return {"name": value.name, "options": self.options(value.options, where)}
        return self.attached(where, "an LM object", str(getattr(value, "name", type(value).__name__)))

    def tools(self, value: Any, where: str) -> Any:
        from rlmx.tools import ToolSet

        if value is None:
            return None
        if isinstance(value, str):
            return [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        tool_set = ToolSet.of(value)
        out = []
        for name, tool in tool_set.tools.items():
            entry: dict[str, Any] = {"name": name}
            if tool.description is not None:
                entry["description"] = tool.description
            if tool.timeout_s is not None:
                entry["timeout_s"] = tool.timeout_s
            if tool.is_function:
                ref = reference(tool.fn)
                if ref is None:
                    ref = self.attached(f"{where}[{name!r}]", "a function with no importable name", name)
                entry["ref"] = ref
            else:
                entry["value"] = tool.fn
            out.append(entry)
        return out

    def output(self, value: Any) -> Any:
        from rlmx.typed import OutputSpec

        if value is None or isinstance(value, Mapping):
            return value
        if isinstance(value, OutputSpec) and value.from_schema:
            return {"schema": dict(value.schema), "name": value.name, "max_retries": value.max_retries}
        ref = reference(value) if inspect.isclass(value) else None
        if ref is not None:
            return {"ref": ref}
        if self.describe:
            spec = OutputSpec.of(value)
            return {"schema": spec.schema if spec is not None else None}
        return self.attached("output", "an output type", repr(value))

    def pricer(self, value: Any) -> Any:
        from rlmx.pricing import Pricing

        if value is None:
            return None
        if isinstance(value, Pricing) and value.catalog:
            return {"prices": {m: [p.input_per_mtok, p.output_per_mtok] for m, p in value.overrides.items()}}
        return self.attached("pricer", "a pricing function", type(value).__name__)

    def cache(self, value: Any) -> Any:
        from rlmx.lm.cache import ResponseCache

        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, ResponseCache):
            return str(value.path)
        return str(value)


def spec_to_data(spec: Any, secrets: dict[str, str] | None, *, describe: bool) -> dict[str, Any]:
    from rlmx.context.prefilter import Prefilter
    from rlmx.engine.profiles import PromptProfile

    w = _Writer(secrets, describe)
    data: dict[str, Any] = {"version": DATA_VERSION}
    data["model"] = w.model(spec.model, "model")
    data["sub_model"] = w.model(spec.sub_model, "sub_model")
    data["models_by_depth"] = {
        str(d): w.model(m, f"models_by_depth[{d}]") for d, m in sorted(spec.models_by_depth.items())
    }
    data["model_options"] = w.options(spec.model_options, "model_options")
    data["sub_model_options"] = w.options(spec.sub_model_options, "sub_model_options")
    for name in SETTINGS:
        data[name] = dataclasses.asdict(getattr(spec, name))
    for name in PLAIN:
        data[name] = getattr(spec, name)
    data["trace"] = str(spec.trace) if isinstance(spec.trace, Path) else spec.trace
    data["cache"] = w.cache(spec.cache)
    prefilter = spec.prefilter
    data["prefilter"] = f"{prefilter.method}:{prefilter.k}" if isinstance(prefilter, Prefilter) else prefilter
    prompt = spec.prompt
    if isinstance(prompt, PromptProfile):
        data["prompt"] = prompt.name
        data["system_prompt_append"] = prompt.append or spec.system_prompt_append
    else:
        data["prompt"] = str(prompt) if isinstance(prompt, Path) else prompt
    data["tools"] = w.tools(spec.tools, "tools")
    data["sub_tools"] = w.tools(spec.sub_tools, "sub_tools")
    data["output"] = w.output(spec.output)
    data["pricer"] = w.pricer(spec.pricer)
    if spec.mcp_servers is not None:  # paths, or dicts as given: `${VAR}` are expanded where they run
        from rlmx.mcp.config import describe as mcp_described
        from rlmx.mcp.config import portable

        data["mcp_servers"] = mcp_described(spec.mcp_servers) if describe else portable(spec.mcp_servers)
    if spec.on_event and describe:
        sinks = spec.on_event if isinstance(spec.on_event, list) else [spec.on_event]
        data["on_event"] = len(sinks)
    return data


def reference(obj: Any) -> str | None:
    """`MODULE:QUALNAME` for an object importable under that name (a module-level function or class)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if found is obj else None


def resolve_reference(ref: str, where: str) -> Any:
    module, sep, qualname = ref.partition(":")
    if not sep:
        raise SpecError(f"{where}: {ref!r} is not a MODULE:ATTR reference")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"{where}: cannot import {ref!r} here ({exc})") from exc
    return found


def spec_from_data(data: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    """The fields of the spec `data` describes (`names`: the spec's field names)."""
    from rlmx.pricing import Price, Pricing

    if not isinstance(data, Mapping) or data.get("version") != DATA_VERSION:
        raise SpecError(f"not a run spec's data (version {DATA_VERSION} expected)")
    known = {*names, "version"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(f"unknown field {unknown[0]!r} in a run spec's data")
    fields: dict[str, Any] = {name: data[name] for name in PLAIN if name in data}
    fields["model"] = _model(data.get("model"))
    fields["sub_model"] = _model(data.get("sub_model"))
    fields["models_by_depth"] = {int(d): _model(m) for d, m in (data.get("models_by_depth") or {}).items()}
    fields["model_options"] = _options(data.get("model_options")) or ModelOptions()
    fields["sub_model_options"] = _options(data.get("sub_model_options"))
    for name, kind in SETTINGS.items():
        if data.get(name) is not None:
            fields[name] = kind(**data[name])
    for name in ("trace", "cache", "prefilter", "prompt", "mcp_servers"):
        if name in data:
            fields[name] = data[name]
    for name in ("tools", "sub_tools"):
        fields[name] = _tools(data.get(name), name)
    output = data.get("output")
    if isinstance(output, Mapping) and "ref" in output:
        fields["output"] = resolve_reference(output["ref"], "output")
    elif isinstance(output, Mapping) and "schema" in output:
        from rlmx.typed import OutputSpec

        fields["output"] = OutputSpec(
            dict(output["schema"]), name=output.get("name"), max_retries=output.get("max_retries", 2)
        )
    else:
        fields["output"] = output
    pricer = data.get("pricer")
    if pricer is not None:
        fields["pricer"] = Pricing({m: Price(float(p[0]), float(p[1])) for m, p in pricer["prices"].items()})
    return fields


def _model(value: Any) -> Any:
    if isinstance(value, Mapping):
        return ModelRef(value["name"], _options(value.get("options")) or ModelOptions())
    return value


def _options(value: Mapping[str, Any] | None) -> ModelOptions | None:
    if value is None:
        return None
    values = dict(value)
    values["retry"] = RetryPolicy(**values.get("retry", {}))
    values["extra"] = dict(values.get("extra") or {})
    return ModelOptions(**values)


def _tools(value: Any, where: str) -> Any:
    from rlmx.tools import Tool

    if value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return tuple(value) if value else value
    tools: dict[str, Any] = {}
    for entry in value:
        fn = (
            resolve_reference(entry["ref"], f"{where}[{entry['name']!r}]")
            if "ref" in entry
            else entry["value"]
        )
        tools[entry["name"]] = Tool(
            fn, description=entry.get("description"), timeout_s=entry.get("timeout_s")
        )
    return tools
