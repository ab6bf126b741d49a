"""An opt-in response cache (SQLite) in front of any LM.

The key is a SHA-256 of the model's identity (provider, model and endpoint), the messages and the
parameters that change a reply: the output cap and the sampling settings (temperature, top_p,
reasoning_effort). A setting that is not set adds nothing to the key, so replies cached before these
settings existed are still found. A hit returns the stored text with `cached=True` and zero usage: the ledger books neither a call nor a cost, and the trace marks the
`lm_call` with `cache_hit`. Only successful replies are stored.

Run bookkeeping that the engine writes into prompts (the "model calls left" counter of a turn
header) is masked in the key: cache hits are not calls, so a replayed run would otherwise see other
counters than the run that filled the cache, and miss on every turn after the first.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.lm.base import LM, BaseLM, CallSettings, LMResponse, Message, with_capabilities
from rlmx.lm.sampling import Sampling, sampling_of
from rlmx.paths import response_cache_path
from rlmx.prompts import VOLATILE_IN_PROMPTS

SCHEMA_VERSION = 1
VOLATILE = VOLATILE_IN_PROMPTS  # defined beside the turn header the engine writes
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    usage TEXT NOT NULL,
    created REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0
)
"""


def cache_key(
    identity: str, messages: list[Message], settings: CallSettings, sampling: Sampling | None = None
) -> str:
    """The key of one request to the model `identity` that samples with `sampling`."""
    sampled = (sampling or Sampling()).body()
    params: dict[str, Any] = {
        "max_output_tokens": settings.max_output_tokens,
        "temperature": sampled.pop("temperature", None),
        **sampled,  # top_p, reasoning_effort: only when set
    }
    payload = {
        "v": SCHEMA_VERSION,
        "model": identity,
        "messages": [{"role": m.get("role"), "content": _stable(m.get("content"))} for m in messages],
        "params": params,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _stable(content: Any) -> Any:
    return VOLATILE.sub(r"\1N", content) if isinstance(content, str) else content


class ResponseCache:
    """A SQLite file of replies. Safe to share between threads and event loops of one process."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else response_cache_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the response cache at {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT text FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self._db.execute("UPDATE responses SET hits = hits + 1 WHERE key = ?", (key,))
            self._db.commit()
            self.hits += 1
            return str(row[0])

    def put(self, key: str, response: LMResponse) -> None:
        usage = json.dumps(vars(response.usage))
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, text, usage, created) VALUES (?, ?, ?, ?, ?)",
                (key, response.model, response.text, usage, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def clear(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM responses")
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedLM(BaseLM):
    """Wraps an LM: answers repeated requests from the cache, stores new successful replies."""

    def __init__(self, inner: BaseLM, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.concurrency = inner.concurrency

    def __repr__(self) -> str:
        return f"CachedLM({self.inner!r}, {self.cache!r})"

    @property
    def cache_identity(self) -> str:
        return self.inner.cache_identity

    @property
    def sampling(self) -> Sampling:
        """The wrapped model's sampling settings (none for a model that keeps none)."""
        return sampling_of(self.inner)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        key = cache_key(self.cache_identity, messages, settings, self.sampling)
        text = self.cache.get(key)
        if text is not None:
            return LMResponse(text=text, model=self.name, attempts=0, cached=True)
        response = await self.inner.complete(messages, settings)
        if not response.cached:
            self.cache.put(key, response)
        return response


def with_cache(lm: LM, cache: ResponseCache | None) -> BaseLM:
    """`lm` with its capabilities declared, answering from `cache` when there is one."""
    model = with_capabilities(lm)
    if cache is None or isinstance(model, CachedLM):
        return model
    return CachedLM(model, cache)


def open_cache(option: str | Path | bool | None) -> ResponseCache | None:
    """`RLM(cache=...)`: None/False: no cache; True: the default file; a path: that file."""
    if option is None or option is False:
        return None
    return ResponseCache(None if option is True else option)
