"""`RLMLogger`: each completion's trajectory (the RLM's configuration, then one record per root turn), in
memory for `RLMChatCompletion.metadata` and, with `log_dir`, appended to a JSONL file there in the
official package's shape (`{"type": "metadata", ...}`, then `{"type": "iteration", ...}` lines)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from rlmx.compat.rlms.core.types import RLMIteration, RLMMetadata


class RLMLogger:
    """Trajectories in memory (`log_dir=None`), and in `log_dir/{file_name}_{time}_{id}.jsonl` too."""

    def __init__(self, log_dir: str | None = None, file_name: str = "rlm") -> None:
        self.log_dir = log_dir
        self.log_file_path: str | None = None
        if log_dir:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
            stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            self.log_file_path = str(Path(log_dir) / f"{file_name}_{stamp}_{uuid.uuid4().hex[:8]}.jsonl")
        self._run_metadata: dict[str, Any] | None = None
        self._iterations: list[dict[str, Any]] = []
        self._iteration_count = 0

    def _write(self, record: dict[str, Any]) -> None:
        if self.log_file_path:
            with open(self.log_file_path, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, default=str) + "\n")

    def log_metadata(self, metadata: RLMMetadata) -> None:
        """The configuration record (the first one only: later calls change nothing)."""
        if self._run_metadata is not None:
            return
        self._run_metadata = metadata.to_dict()
        self._write({"type": "metadata", "timestamp": datetime.now().isoformat(), **self._run_metadata})

    def log(self, iteration: RLMIteration) -> None:
        """One root turn's record."""
        self._iteration_count += 1
        record = {
            "type": "iteration",
            "iteration": self._iteration_count,
            "timestamp": datetime.now().isoformat(),
            **iteration.to_dict(),
        }
        self._iterations.append(record)
        self._write(record)

    def clear_iterations(self) -> None:
        """Start the next completion's trajectory (the configuration record stays)."""
        self._iterations = []
        self._iteration_count = 0

    def get_trajectory(self) -> dict[str, Any] | None:
        """`{"run_metadata": ..., "iterations": [...]}` of the current completion; None before any."""
        if self._run_metadata is None:
            return None
        return {"run_metadata": self._run_metadata, "iterations": list(self._iterations)}

    @property
    def iteration_count(self) -> int:
        return self._iteration_count
