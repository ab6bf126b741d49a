"""Many RLM questions at once: `rlmx batch` and its Python API.

    import rlmx.batch
    batch = rlmx.batch.run(
        [{"id": "a", "question": "...", "context": "docs/a.txt"}, ...],
        model="openai:gpt-5-mini", out="results.jsonl", executor="local", concurrency=8,
    )
    for result in batch:          # result lines, as items finish
        print(result["id"], result["stopped_by"], result["answer"])
    print(batch.summary.exit_code)

Executors: `local` (asyncio in this process) and `ray` (`pip install 'rlmx[ray]'`, a Ray cluster). The
batch's own limits (`BatchLimits`) and each model's rate limit hold across all items, wherever they run.
See docs/scaling.md.
"""

from __future__ import annotations

from rlmx.batch.fleet import BatchLimits
from rlmx.batch.items import BatchInputError, BatchItem, read_items
from rlmx.batch.runner import Batch, Summary, run

__all__ = ["Batch", "BatchInputError", "BatchItem", "BatchLimits", "Summary", "read_items", "run"]
