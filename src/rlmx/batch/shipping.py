"""How an item's context reaches the node that runs it (ray executor).

- Text given inline (`{"text": ...}`), and files whose total size is at most `SHIP_MAX_BYTES` (64 MiB),
  are read once on the driver and put in Ray's object store, keyed by a hash of their content: items that
  share a context share one copy, fetched once per node. The node writes the files into a
  content-addressed cache (`<state dir>/batch-contexts/`) and the run reads them there; the names the
  model sees are the original ones.
- Bigger contexts travel as their file list only: each node reads the files from the same path, so they
  must be on storage every node mounts (NFS, a shared volume).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

SHIP_MAX_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Shipped:
    """A context in transit: `kind` "none", "value" (text), "files" (contents shipped) or "paths" (read
    on the node from the same paths)."""

    kind: str
    key: str = ""  # the content hash
    value: Any = None  # the text; the Context ("paths"); the manifest with content hashes ("files")
    blobs: dict[str, bytes] = dataclasses.field(default_factory=dict)  # content hash -> file bytes
    given: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.blobs.values()) + (len(self.value) if self.kind == "value" else 0)


def pack(context: Any, *, max_bytes: int = SHIP_MAX_BYTES) -> Shipped:
    """What to send for a loaded `rlmx.context.Context` (None: no context)."""
    if context is None:
        return Shipped("none")
    manifest = context.manifest
    if manifest is None:
        value = context.load()
        if isinstance(value, str):
            return Shipped("value", hashlib.sha256(value.encode("utf-8")).hexdigest(), value)
        return Shipped("paths", "", context)  # a value in memory of another kind: sent as is
    total = sum(entry.size for entry in manifest.files)
    if total > max_bytes:
        return Shipped("paths", "", context)
    blobs: dict[str, bytes] = {}
    files = []
    digest = hashlib.sha256()
    for entry in manifest.files:
        data = Path(entry.path).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        blobs[sha] = data
        files.append(dataclasses.replace(entry, path=sha + Path(entry.path).suffix, size=len(data)))
        digest.update(f"{entry.name}\0{sha}\0".encode())
    for doc in manifest.inline:
        digest.update(f"{doc['path']}\0{doc['text']}\0".encode())
    shipped_manifest = dataclasses.replace(manifest, files=files)
    return Shipped("files", digest.hexdigest(), shipped_manifest, blobs, tuple(context.given or ()))


def unpack(shipped: Shipped, cache_dir: Path) -> Any:
    """The Context a node runs with: shipped files written once into `cache_dir` (by content hash)."""
    from rlmx.context.context import Context

    if shipped.kind == "none":
        return None
    if shipped.kind == "value":
        return Context.of(shipped.value)
    if shipped.kind == "paths":
        return shipped.value
    cache_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for entry in shipped.value.files:
        sha = entry.path.split(".", 1)[0]
        target = cache_dir / entry.path
        if not target.exists():
            tmp = cache_dir / f".{entry.path}.{os.getpid()}.tmp"
            tmp.write_bytes(shipped.blobs[sha])
            os.replace(tmp, target)  # atomic: another worker of this node may write the same file
        files.append(dataclasses.replace(entry, path=str(target)))
    manifest = dataclasses.replace(shipped.value, files=files)
    return Context(manifest=manifest, given=shipped.given)
