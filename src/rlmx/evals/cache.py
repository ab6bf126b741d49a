"""A response cache for eval runs (SQLite): re-running a suite, or resuming one that stopped, does not
pay again for calls already made. Keyed on the model name, the messages, the output cap, the model's
sampling settings and the prompt profile of the run that made the call: a reply made under other
settings is never reused. (A setting left unset, or the default `rlmx` profile, adds nothing to the key,
so a cache written before these were part of it is still read.)

A hit returns the stored reply with the usage of the original call, so reports show what the method
costs, not what the re-run cost; hits are counted per wrapper (`hits`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlmx.lm.base import LM, CallSettings, LMResponse, Message, Usage
from rlmx.lm.sampling import sampling_of


class ResponseStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(str(path))
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, text TEXT, usage TEXT, at REAL)"
        )
        self.db.commit()

    @staticmethod
    def key(
        model: str,
        messages: list[Message],
        settings: CallSettings,
        sampling: Mapping[str, Any] | None = None,
        prompt: str | None = None,
    ) -> str:
        """`sampling`: the settings the model sends (`Sampling.body()`); `prompt`: the prompt profile of
        the run, None for the default one."""
        parts: list[Any] = [model, messages, settings.max_output_tokens, None]  # None: keys stay as they were
        if sampling:
            parts.append({"sampling": dict(sampling)})
        if prompt:
            parts.append({"prompt": prompt})
        blob = json.dumps(parts, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> LMResponse | None:
        row = self.db.execute("SELECT model, text, usage FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return LMResponse(text=row[1], usage=Usage(**json.loads(row[2])), model=row[0])

    def put(self, key: str, response: LMResponse) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
            (key, response.model, response.text, json.dumps(asdict(response.usage)), time.time()),
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()


class CachedLM:
    """Wraps an LM with a ResponseStore. Only successful, non-empty replies are stored. `prompt`: the
    prompt profile of the run whose calls go through it (None: the default one, or a baseline)."""

    def __init__(self, inner: LM, store: ResponseStore, *, prompt: str | None = None) -> None:
        self.inner = inner
        self.store = store
        self.name = inner.name
        self.sampling = sampling_of(inner)  # the model's settings, readable through the wrapper
        self.prompt = prompt
        self.hits = 0
        self.misses = 0

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        key = self.store.key(self.name, messages, settings, self.sampling.body(), self.prompt)
        found = self.store.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        response = await self.inner.complete(messages, settings)
        if response.text:
            self.store.put(key, response)
        return response
