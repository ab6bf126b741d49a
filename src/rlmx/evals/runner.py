"""Run the suite: every item of every family and size, through the RLM and the baselines; one JSONL
record per (item, method), appended as soon as it is scored; completed records are skipped on re-runs.

The sampling settings (`EvalConfig.sampling` for the root model, which the baselines call too;
`sub_sampling` for the sub-model) are the models' own, so they reach every request; the prompt profile
(`prompt`, `system_prompt_append`) is the RLM method's. Both are part of the folder's identity, of the
response cache's key and of every record."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rlmx.engine.profiles import PromptProfile
from rlmx.errors import ConfigError, RLMError
from rlmx.evals.baselines import RUNNERS, BaselineSettings, MethodResult
from rlmx.evals.cache import CachedLM, ResponseStore
from rlmx.evals.items import EvalItem, Noise, size_label
from rlmx.evals.needs import check_installed
from rlmx.evals.oracle import Oracle
from rlmx.evals.records import METHODS, RESULTS, latest, load_records
from rlmx.evals.registry import (
    IMAGE_FAMILIES,
    built_variant,
    check_image_methods,
    check_variant,
    family,
    generate_item,
)
from rlmx.evals.report import write_report
from rlmx.limits import Limits
from rlmx.lm.base import LM, context_window_for
from rlmx.lm.options import ModelRef
from rlmx.lm.registry import ModelOptions, provider_of, resolve_model
from rlmx.lm.sampling import Sampling, check_accepted, sampling_of
from rlmx.spec.run import RunSpec

DEFAULT_PROMPT = "rlmx"


@dataclass
class EvalConfig:
    suite: tuple[str, ...]
    sizes: tuple[int, ...]
    out: Path
    n: int = 20
    seed: int = 0
    methods: tuple[str, ...] = METHODS
    model: str | None = None
    sub_model: str | None = None
    model_options: ModelOptions = field(default_factory=ModelOptions)
    limits: Limits = field(default_factory=Limits)
    window: int | None = None  # the root model's window for the baselines; default: its known window
    concurrency: int = 8
    cache: bool = True
    trace: bool = True
    variants: dict[str, str] = field(default_factory=dict)
    oracle: bool = False  # scripted root + oracle reader instead of real models
    noise: float = 0.0  # the oracle's error rate
    baseline: BaselineSettings = field(default_factory=BaselineSettings)
    prices: tuple[float, float] | None = None  # USD per million input / output tokens, for every model
    pricer: Any = None  # or a function (model name, Usage) -> USD | None
    # the root model's sampling settings (the RLM's root calls and the baselines' calls), over those of
    # `model_options`; the sub-model's, which start from the root's when the sub-model is the root model
    sampling: Sampling = field(default_factory=Sampling)
    sub_sampling: Sampling = field(default_factory=Sampling)
    # the RLM method's prompt profile: "rlmx", "official" or a template file (read when the config is made)
    prompt: str | PromptProfile = DEFAULT_PROMPT
    system_prompt_append: str = ""
    # where items run: "local" (asyncio in this process) or "ray" (tasks on a Ray cluster at `address`;
    # see rlmx.evals.distributed and docs/scaling.md)
    executor: str = "local"
    address: str | None = None
    mcp_servers: Any = None  # the RLM method's MCP servers (RunSpec.mcp_servers; rlmx.mcp)
    profile: PromptProfile = field(init=False, repr=False)

    def price(self) -> Any:
        if self.pricer is not None or self.prices is None:
            return self.pricer
        per_in, per_out = self.prices
        return lambda _name, usage: (usage.input_tokens * per_in + usage.output_tokens * per_out) / 1e6

    def __post_init__(self) -> None:
        for name in self.suite:
            self.variants[name] = check_variant(name, self.variants.get(name))
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ConfigError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
        if not self.oracle and not self.model:
            raise ConfigError(
                "rlmx eval needs `model` PROVIDER:MODEL (or `oracle` to check the suite itself)"
            )
        if self.n < 1 or self.concurrency < 1:
            raise ConfigError("`n` and `concurrency` must be >= 1")
        if not 0.0 <= self.noise < 1.0:
            raise ConfigError("`noise` must be in [0, 1)")
        terms = {"suite": "family", "methods": "the baselines", "fix": "give `methods`=('rlm',)"}
        check_image_methods(self.suite, self.methods, terms)
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {self.executor!r}; choose local or ray")
        if self.address and self.executor != "ray":
            raise ConfigError("`address` is for `executor`=ray; the local executor runs in this process")
        self.profile = PromptProfile.of(self.prompt, append=self.system_prompt_append)

    def role_sampling(self) -> tuple[Sampling, Sampling]:
        """The settings the root model and the sub-model are built with (as `rlmx ask` builds them: a
        sub-model that is the root model takes the root's settings for those it leaves unset; another
        model starts from `model_options`' own)."""
        base = self.model_options.sampling()
        root = self.sampling.over(base)
        same = self.sub_model is None or self.sub_model == self.model
        return root, self.sub_sampling.over(root if same else base)

    def model_refs(self) -> tuple[ModelRef, ModelRef]:
        """The root model and the sub-model as data: each model string with `model_options` and its
        role's sampling settings (`role_sampling`); one reference for both when the sub-model is the root
        model with the same settings (so it becomes one model object)."""
        if not self.model:
            raise ConfigError("the oracle's models are objects: give them to run_spec")
        root_sampling, sub_sampling = self.role_sampling()
        sub_name = self.sub_model or self.model
        root = ModelRef(self.model, self.model_options.with_sampling(root_sampling))
        if sub_name == self.model and sub_sampling == root_sampling:
            return root, root
        return root, ModelRef(sub_name, self.model_options.with_sampling(sub_sampling))

    def run_spec(self, root: Any = None, sub: Any = None, *, trace: Path | bool = False) -> RunSpec:
        """The RLM method's run as a `RunSpec`: its models (`model_refs()`, or the model objects `root`
        and `sub` that stand for them: an item's cached or oracle models), `limits`, the pricer, the
        prompt profile (read when the config was made; it carries `system_prompt_append`), `trace`."""
        if root is None:
            root, sub = self.model_refs()
        return RunSpec(
            root,
            sub_model=sub,
            limits=self.limits,
            trace=trace,
            pricer=self.price(),
            prompt=self.profile,
            mcp_servers=self.mcp_servers,
        )

    def identity(self) -> dict[str, Any]:
        """What makes results comparable: a resumed run must match it."""
        return {
            "model": "oracle" if self.oracle else self.model,
            "sub_model": "oracle" if self.oracle else self.sub_model or self.model,
            "noise": self.noise,
            "seed": self.seed,
            "variants": dict(sorted(self.variants.items())),
            "limits": asdict(self.limits),
            "baseline": asdict(self.baseline),
            "prices": self.prices,
            **self.run_settings(),
        }

    def run_settings(self) -> dict[str, Any]:
        """The sampling settings and the prompt profile, where they differ from the defaults (so a folder
        made before they existed, or without them, keeps its identity)."""
        root, sub = self.role_sampling()
        out: dict[str, Any] = {}
        if root or sub:
            out["sampling"] = {"root": root.body(), "sub": sub.body()}
        if self.profile.name != DEFAULT_PROMPT:
            out["prompt"] = self.profile.name
        if self.profile.append.strip():
            out["system_prompt_append"] = self.profile.append
        return out


class Runner:
    def __init__(
        self, config: EvalConfig, *, oracle: Oracle | None = None, log: Callable[[str], None] | None = None
    ) -> None:
        self.config = config
        self.oracle = oracle or (Oracle(noise=Noise(config.noise, config.seed)) if config.oracle else None)
        self.log = log or (lambda _line: None)
        self.store: ResponseStore | None = None
        self.root_lm: LM | None = None
        self.sub_lm: LM | None = None
        self._write_lock = asyncio.Lock()
        self.built: dict[str, str] = {}  # family -> the variant its items are built from (after _prepare)

    def prepare_models(self) -> None:
        """The root and sub-model objects; a bad model, a missing key or a refused setting fails here."""
        cfg = self.config
        if not cfg.oracle:
            root, sub = cfg.model_refs()
            self.root_lm = self._model(root)
            self.sub_lm = self.root_lm if sub is root else self._model(sub)

    def _prepare(self) -> set[tuple[str, str]]:
        cfg = self.config
        check_installed(cfg)  # before any model is made or item generated
        self.prepare_models()  # before anything is written
        cfg.out.mkdir(parents=True, exist_ok=True)
        config_path = cfg.out / "config.json"
        identity = json.loads(json.dumps(cfg.identity()))  # as it reads back from the file
        if config_path.exists() and (cfg.out / RESULTS).exists():
            previous = json.loads(config_path.read_text(encoding="utf-8"))
            if previous.get("identity") != identity:
                raise ConfigError(
                    f"{cfg.out} holds results of another configuration (models, limits, seed, sampling "
                    "settings or prompt profile differ); use a new `out` folder"
                )
        config_path.write_text(json.dumps({"identity": identity}, indent=1), encoding="utf-8")
        if not cfg.oracle and cfg.cache:
            self.store = ResponseStore(cfg.out / "cache.sqlite")
        done = {key for key, r in latest(load_records(cfg.out)).items() if r.get("status") == "ok"}
        self.built = {name: built_variant(name, cfg.variants[name]) for name in cfg.suite}
        for name, used in self.built.items():
            if used != cfg.variants[name]:
                self.log(f"{name}: variant {cfg.variants[name]} is not installed here; items are {used}")
        return done

    def _model(self, ref: ModelRef) -> LM:
        lm = resolve_model(ref.name, ref.options)
        check_accepted(ref.options.sampling(), provider_of(ref.name), ref.name.partition(":")[2])
        return lm

    async def run(self) -> list[dict[str, Any]]:
        done = self._prepare()
        cfg = self.config
        jobs = self.jobs()
        gate = asyncio.Semaphore(cfg.concurrency)
        written: list[dict[str, Any]] = []

        async def job(name: str, size: int, index: int) -> None:
            from rlmx.evals.items import item_id

            key = item_id(name, self.built[name], size, cfg.seed, index)
            todo = [m for m in cfg.methods if (key, m) not in done]
            if not todo:
                return
            async with gate:
                item = await asyncio.to_thread(self.item, name, size, index)
                if self.oracle is not None:
                    self.oracle.add(item)
                for method in todo:
                    record = await self._run_method(item, method, index)
                    async with self._write_lock:
                        with (cfg.out / RESULTS).open("a", encoding="utf-8") as handle:
                            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                    written.append(record)
                    self.log(
                        f"{item.id} {method}: score {record['score']:.3f} ({record['stopped_by']}, "
                        f"{record['elapsed_s']:.1f}s)"
                    )

        try:
            await asyncio.gather(*(job(*j) for j in jobs))
        finally:
            if self.store is not None:
                self.store.close()
        return written

    def jobs(self) -> list[tuple[str, int, int]]:
        cfg = self.config
        return [(name, size, i) for name in cfg.suite for size in cfg.sizes for i in range(cfg.n)]

    def run_distributed(self) -> list[dict[str, Any]]:
        """`run`, with the items as tasks of the ray executor (rlmx.evals.distributed)."""
        from rlmx.evals.distributed import run_on_ray

        done = self._prepare()
        if self.store is not None:  # each node runs without the response cache (docs/scaling.md)
            self.store.close()
            self.store = None
        return run_on_ray(Runner, self.config, self.pending(self.jobs(), done), log=self.log)

    def pending(self, jobs: list[tuple[str, int, int]], done: set[tuple[str, str]]) -> list[Any]:
        """The jobs with methods still to run, as `rlmx.evals.distributed.EvalJob`s."""
        from rlmx.evals.distributed import EvalJob
        from rlmx.evals.items import item_id

        cfg = self.config
        out = []
        for name, size, index in jobs:
            key = item_id(name, self.built[name], size, cfg.seed, index)
            todo = tuple(m for m in cfg.methods if (key, m) not in done)
            if todo:
                out.append(EvalJob(name, size, index, todo))
        return out

    async def run_job(
        self, name: str, size: int, index: int, methods: tuple[str, ...]
    ) -> list[dict[str, Any]]:
        """One item's records (its methods in turn), generated and run here: a ray worker's unit."""
        item = await asyncio.to_thread(self.item, name, size, index)
        if self.oracle is not None:
            self.oracle.add(item)
        return [await self._run_method(item, method, index) for method in methods]

    def item(self, name: str, size: int, index: int) -> EvalItem:
        """One generated item; an image family's pictures are written under `out`/images/<item id>, the
        folder its RLM run reads as its context."""
        cfg = self.config
        item = generate_item(name, size, index, cfg.seed, cfg.variants[name])
        if name in IMAGE_FAMILIES:
            from rlmx.evals.receipts import write_images

            item.key["folder"] = str(write_images(item, cfg.out / "images" / item.id))
        return item

    def _models(self, item: EvalItem, method: str) -> tuple[LM, LM]:
        if self.config.oracle and item.family in IMAGE_FAMILIES:
            from rlmx.evals.receipts import receipts_oracle

            return receipts_oracle(item)  # type: ignore[no-any-return]
        if self.oracle is not None and self.config.oracle:
            return self.oracle.models_for(item)
        assert self.root_lm is not None and self.sub_lm is not None
        if self.store is None:
            return self.root_lm, self.sub_lm
        # the RLM's calls are cached under its prompt profile too; the baselines use none
        prompt = cache_tag(self.config.profile) if method == "rlm" else None
        root = CachedLM(self.root_lm, self.store, prompt=prompt)
        return root, (
            root if self.sub_lm is self.root_lm else CachedLM(self.sub_lm, self.store, prompt=prompt)
        )

    async def _run_method(self, item: EvalItem, method: str, index: int) -> dict[str, Any]:
        cfg = self.config
        root, sub = self._models(item, method)
        started = time.monotonic()
        try:
            if method == "rlm":
                result = await self._run_rlm(item, root, sub)
            else:
                window = cfg.window or context_window_for(root.name)
                base = {**asdict(cfg.baseline), "window": window}
                if base["max_output_tokens"] is None:  # the run's cap holds for the baselines' calls too
                    base["max_output_tokens"] = cfg.limits.max_output_tokens
                settings = BaselineSettings(**base)
                result = await RUNNERS[method](root, item, settings, cfg.price())
            status = "ok"
        except ConfigError:
            raise
        except (RLMError, OSError, ValueError, RuntimeError) as exc:
            result = MethodResult(answer="", stopped_by="error", error=f"{type(exc).__name__}: {exc}")
            result.elapsed_s = time.monotonic() - started
            status = "error"
        score = family(item.family).score(result.answer, item)
        hits = sum(getattr(lm, "hits", 0) for lm in {id(root): root, id(sub): sub}.values())
        return {
            "item_id": item.id,
            "family": item.family,
            "variant": item.variant,
            "size": size_label(item.size_tokens),
            "size_tokens": item.size_tokens,
            "context_tokens": item.context_tokens,
            "index": index,
            "seed": cfg.seed,
            "method": method,
            "model": root.name,
            "sub_model": sub.name,
            "prompt": cfg.profile.name if method == "rlm" else None,
            "sampling": {"root": sampling_of(root).body(), "sub": sampling_of(sub).body()}
            if method == "rlm"
            else {"root": sampling_of(root).body()},
            "question": item.question,
            "answer": result.answer,
            "gold": item.gold,
            "score": score.value,
            "metrics": score.metrics,
            "stopped_by": result.stopped_by,
            "iterations": result.iterations,
            "error": result.error,
            "truncated": result.truncated,
            "usage": result.usage,
            "elapsed_s": round(result.elapsed_s, 3),
            "trace_path": result.trace_path,
            "cache_hits": hits,
            "spec": item.spec,
            "source": item.source,
            "extra": result.extra,
            "status": status,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    async def _run_rlm(self, item: EvalItem, root: LM, sub: LM) -> MethodResult:
        from rlmx.answer import answer_text
        from rlmx.rlm import RLM

        cfg = self.config
        trace: Path | bool = cfg.out / "traces" / f"{item.id}.jsonl" if cfg.trace else False
        rlm = RLM.from_spec(cfg.run_spec(root, sub, trace=trace))
        context: Any = item.context
        if "folder" in item.key:  # an image family's pictures
            from rlmx.context import Context

            context = Context.from_paths([item.key["folder"]])
        run = await rlm.arun(item.question, context)
        usage = {k: run.usage.get(k) for k in ("calls", "input_tokens", "output_tokens", "cost_usd")}
        return MethodResult(
            answer=answer_text(run.answer) if run.answer is not None else "",
            stopped_by=run.stopped_by,
            usage=usage,
            elapsed_s=run.elapsed_s,
            error=run.error,
            iterations=run.iterations,
            trace_path=run.trace_path,
        )


def cache_tag(profile: PromptProfile) -> str | None:
    """What the response cache keys an RLM's calls on besides the messages: the prompt profile's name
    and a digest of the appended text; None for the default profile with nothing appended (the key of
    a cache written before profiles existed)."""
    append = profile.append.strip()
    if profile.name == DEFAULT_PROMPT and not append:
        return None
    digest = hashlib.sha256(append.encode()).hexdigest()[:16] if append else ""
    return f"{profile.name}+{digest}" if digest else profile.name


def run_suite(
    config: EvalConfig, *, oracle: Oracle | None = None, log: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Run (or resume) the suite and write the report; returns the records written by this run."""

    runner = Runner(config, oracle=oracle, log=log)
    written = runner.run_distributed() if config.executor == "ray" else asyncio.run(runner.run())
    write_report(config.out)
    return written
