"""The model seam: providers are records the registry imports nothing for, LMs declare their optional
capabilities on a base class, the real-provider guard is public, settings errors are one type, and an
`RLM` re-reads models assigned after it was built."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlmx import RLM, Limits
from rlmx.errors import ConfigError, InvalidSettings, RealProviderForbidden
from rlmx.lm import BaseLM, CallSettings, LMResponse, check_endpoint, with_capabilities
from rlmx.lm.cache import ResponseCache, with_cache
from rlmx.lm.providers import BUILT_IN
from rlmx.lm.registry import PROVIDERS, provider_of
from rlmx.pricing import catalog_id, runs_locally
from rlmx.sandbox.base import SandboxSettings
from rlmx.testing import FunctionLM

SRC = Path(__file__).resolve().parents[2] / "src" / "rlmx"


def test_the_registry_imports_no_provider_module() -> None:
    tree = ast.parse((SRC / "lm" / "registry.py").read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    providers = {
        "rlmx.lm.openai_compat",
        "rlmx.lm.anthropic",
        "rlmx.lm.azure",
        "rlmx.lm.llama_cpp",
        "rlmx.lm.compatible",
    }
    assert not imported & providers
    code = "import sys, rlmx.lm.registry; print(sorted(m for m in sys.modules if m.startswith(('rlmx.lm.openai_compat', 'rlmx.lm.anthropic', 'rlmx.lm.llama_cpp', 'anthropic', 'llama_cpp'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_built_in_provider_is_one_record_the_price_lookup_reads() -> None:
    assert {r.name for r in BUILT_IN} <= set(PROVIDERS)
    for record in BUILT_IN:
        assert isinstance(record.factory, str) and ":" in record.factory
        assert catalog_id(record.name) == record.price_id
        assert runs_locally(f"{record.name}:m") == record.local
    assert provider_of("anthropic:claude-x") is PROVIDERS["anthropic"]
    assert catalog_id("gemini") == "google"  # a prefix without a record still has its catalog alias


class Bare:
    """An LM that declares nothing beyond the protocol."""

    name = "bare:one"

    async def complete(self, messages: list[dict[str, Any]], settings: CallSettings) -> LMResponse:
        return LMResponse("FINAL(bare)")


def test_a_plain_lm_gets_the_default_capabilities() -> None:
    lm = with_capabilities(Bare())
    assert isinstance(lm, BaseLM) and lm.concurrency is None and lm.cache_identity == "bare:one"
    import asyncio

    asyncio.run(lm.aclose())  # nothing to close, and no error
    assert with_capabilities(lm) is lm


def test_the_cache_wrapper_keeps_the_inner_capabilities(tmp_path: Path) -> None:
    class Declared(Bare, BaseLM):
        concurrency = 7

        @property
        def cache_identity(self) -> str:
            return "declared@somewhere"

    cached = with_cache(Declared(), ResponseCache(tmp_path / "c.sqlite"))
    assert cached.concurrency == 7 and cached.cache_identity == "declared@somewhere"


def test_check_endpoint_is_the_guard_third_party_lms_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMX_FORBID_REAL_PROVIDERS", "1")
    check_endpoint("http://127.0.0.1:9/v1")
    check_endpoint("http://localhost:9/v1")
    with pytest.raises(RealProviderForbidden, match=r"api\.example\.com"):
        check_endpoint("https://api.example.com/v1")
    with pytest.raises(RealProviderForbidden, match="default endpoint"):
        check_endpoint(None)
    monkeypatch.setenv("RLMX_FORBID_REAL_PROVIDERS", "0")
    check_endpoint("https://api.example.com/v1")


@pytest.mark.parametrize(
    "make",
    [
        lambda: Limits(max_depth=99),
        lambda: Limits(max_errors=0),
        lambda: SandboxSettings(backend="nope"),
    ],
    ids=["limits", "max_errors", "sandbox"],
)
def test_invalid_settings_are_one_type_that_is_also_a_value_error(make: Any) -> None:
    with pytest.raises(InvalidSettings) as caught:
        make()
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ConfigError)


def test_assigning_the_model_after_construction_takes_effect_at_the_next_run() -> None:
    first = FunctionLM(lambda m, s: "FINAL(first)", name="function:first")
    second = FunctionLM(lambda m, s: "FINAL(second)", name="function:second")
    rlm = RLM(first, trace=False, sandbox=SandboxSettings(backend="local"))
    assert rlm.run("q", "ctx").answer == "first"
    rlm.model = second
    result = rlm.run("q", "ctx")
    assert result.answer == "second" and set(result.usage["by_model"]) == {"function:second"}
    assert len(first.calls) == 1 and len(second.calls) == 1
