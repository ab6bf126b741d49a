"""The official package's result and record types (`rlm.core.types`), with its names and fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

ClientBackend = Literal[
    "openai", "portkey", "openrouter", "vercel", "vllm", "anthropic", "azure_openai", "gemini"
]
EnvironmentType = Literal["local", "ipython", "docker", "modal", "prime", "daytona", "e2b"]


def serialize(value: Any) -> Any:
    """A value as JSON: plain values as they are, containers item by item, anything else by name/repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, ModuleType):
        return f"<module '{value.__name__}'>"
    if isinstance(value, (list, tuple)):
        return [serialize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): serialize(v) for k, v in value.items()}
    if callable(value):
        return f"<{type(value).__name__} '{getattr(value, '__name__', repr(value))}'>"
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


@dataclass
class ModelUsageSummary:
    """One model's calls, tokens and (provider-reported) cost in USD."""

    total_calls: int
    total_input_tokens: int
    total_output_tokens: int
    total_cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total_calls": self.total_calls,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
        }
        if self.total_cost is not None:
            out["total_cost"] = self.total_cost
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelUsageSummary:
        return cls(
            data.get("total_calls", 0),
            data.get("total_input_tokens", 0),
            data.get("total_output_tokens", 0),
            data.get("total_cost"),
        )


@dataclass
class UsageSummary:
    """Usage by model name."""

    model_usage_summaries: dict[str, ModelUsageSummary]

    @property
    def total_cost(self) -> float | None:
        costs = [s.total_cost for s in self.model_usage_summaries.values() if s.total_cost is not None]
        return sum(costs) if costs else None

    @property
    def total_input_tokens(self) -> int:
        return sum(s.total_input_tokens for s in self.model_usage_summaries.values())

    @property
    def total_output_tokens(self) -> int:
        return sum(s.total_output_tokens for s in self.model_usage_summaries.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model_usage_summaries": {m: s.to_dict() for m, s in self.model_usage_summaries.items()}
        }
        if self.total_cost is not None:
            out["total_cost"] = self.total_cost
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UsageSummary:
        summaries = data.get("model_usage_summaries", {})
        return cls({m: ModelUsageSummary.from_dict(s) for m, s in summaries.items()})


@dataclass
class RLMChatCompletion:
    """What `RLM.completion` returns: the answer (`response`, a string), usage, time and, with a logger,
    the trajectory in `metadata`."""

    root_model: str
    prompt: Any
    response: str
    usage_summary: UsageSummary
    execution_time: float
    metadata: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "root_model": self.root_model,
            "prompt": self.prompt,
            "response": self.response,
            "usage_summary": self.usage_summary.to_dict(),
            "execution_time": self.execution_time,
        }
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RLMChatCompletion:
        return cls(
            root_model=data.get("root_model", ""),
            prompt=data.get("prompt"),
            response=data.get("response", ""),
            usage_summary=UsageSummary.from_dict(data.get("usage_summary") or {}),
            execution_time=data.get("execution_time", 0.0),
            metadata=data.get("metadata"),
            error=data.get("error"),
        )


@dataclass
class REPLResult:
    """One code block's result. `locals` holds the names of the REPL's plain variables (rlmx's worker
    keeps the values on its side of the bridge)."""

    stdout: str
    stderr: str
    locals: dict[str, Any]
    execution_time: float | None = None
    rlm_calls: list[RLMChatCompletion] = field(default_factory=list)
    final_answer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "locals": {k: serialize(v) for k, v in self.locals.items()},
            "execution_time": self.execution_time,
            "rlm_calls": [call.to_dict() for call in self.rlm_calls],
            "final_answer": self.final_answer,
        }


@dataclass
class CodeBlock:
    code: str
    result: REPLResult

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "result": self.result.to_dict()}


@dataclass
class RLMIteration:
    """One root turn: the messages sent, the reply, its blocks, the answer it gave (if any)."""

    prompt: Any
    response: str
    code_blocks: list[CodeBlock]
    final_answer: str | None = None
    iteration_time: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "response": self.response,
            "code_blocks": [block.to_dict() for block in self.code_blocks],
            "final_answer": self.final_answer,
            "iteration_time": self.iteration_time,
        }


@dataclass
class RLMMetadata:
    """The RLM's configuration, as the logger's first record (API keys left out)."""

    root_model: str
    max_depth: int
    max_iterations: int
    backend: str
    backend_kwargs: dict[str, Any]
    environment_type: str
    environment_kwargs: dict[str, Any]
    other_backends: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "root_model": self.root_model,
            "max_depth": self.max_depth,
            "max_iterations": self.max_iterations,
            "backend": self.backend,
            "backend_kwargs": {k: serialize(v) for k, v in self.backend_kwargs.items()},
            "environment_type": self.environment_type,
            "environment_kwargs": {k: serialize(v) for k, v in self.environment_kwargs.items()},
            "other_backends": self.other_backends,
        }


def without_keys(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` without API keys (any name holding both "api" and "key")."""
    return {k: v for k, v in kwargs.items() if not ("api" in k.lower() and "key" in k.lower())}
