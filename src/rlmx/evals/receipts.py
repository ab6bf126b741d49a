"""Receipts: a vision family. Pictures with rendered words and numbers (Pillow), a few receipts among
many distractors (menus, tickets, notes); the question needs several of them: which receipts are over a
threshold, and the sum of their totals. Gold answers are exact from the construction.

    item = Receipts().generate(24, index=0, seed=0)
    folder = write_images(item, tmp)              # PNG files; the context is that folder
    root, reader = receipts_oracle(item, folder)  # a scripted root and a vision "reader" that knows

The oracle's reader does not look at pixels: it finds the image it is given by the SHA-256 of its bytes
and answers from the generator's ground truth, so its score of 1.0 checks the plumbing (files become
image documents, sub-calls carry the exact bytes, answers come back), not any model's eyesight. Drawing
needs Pillow (the `images` extra); a real vision model measures the family with `images=`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from pathlib import Path
from typing import Any

from rlmx.evals.items import EvalItem, Score, item_id, repl, rng_for
from rlmx.lm.base import CallSettings, Message

THRESHOLD = 100
TOKENS_PER_PICTURE = 1_024  # how `rlmx eval`'s sizes read for this family: 8K tokens is 8 pictures
KINDS = ("MENU", "TICKET", "NOTE", "COUPON")
READ = "Read this image. If it is a receipt, reply 'RECEIPT <id> TOTAL <amount>'; otherwise reply 'OTHER'."


class Receipts:
    name = "receipts"
    description = "vision: which receipts (among distractor pictures) total over 100, and their sum"
    variants = ("png",)
    sources = {"png": "generated offline with Pillow (no external data)"}  # noqa: RUF012

    def built(self, variant: str) -> str:
        return "png"

    def generate(self, n_images: int, index: int, seed: int, variant: str = "png") -> EvalItem:
        """`n_images` pictures (at least 6): about a quarter receipts, the rest distractors."""
        rng = rng_for(self.name, n_images, seed, index)
        n = max(6, n_images)
        n_receipts = max(3, n // 4)
        pictures: list[dict[str, Any]] = []
        for i in range(n_receipts):
            high = i == 0 or (i > 1 and rng.random() < 0.5)  # at least one over and one under
            total = (rng.randint(101, 480) if high else rng.randint(12, 99)) + rng.randint(0, 99) / 100
            pictures.append(
                {"kind": "RECEIPT", "id": f"R-{rng.randint(100, 999)}-{i}", "total": round(total, 2)}
            )
        for i in range(n - n_receipts):
            kind = KINDS[i % len(KINDS)]
            pictures.append(
                {"kind": kind, "id": f"{kind[0]}-{rng.randint(100, 999)}", "total": rng.randint(101, 900)}
            )
        rng.shuffle(pictures)
        over = sorted(p["id"] for p in pictures if p["kind"] == "RECEIPT" and p["total"] > THRESHOLD)
        total = round(sum(p["total"] for p in pictures if p["id"] in over), 2)
        truth = {f"scan_{k:03d}.png": p for k, p in enumerate(pictures)}
        return EvalItem(
            family=self.name,
            variant="png",
            id=f"{self.name}-png-{n}-s{seed}-{index:03d}",
            size_tokens=n,
            question=(
                f"Which receipts have a total over {THRESHOLD}, and what is the sum of those totals? "
                "Answer as: IDS: <comma-separated receipt ids, sorted>; SUM: <sum with 2 decimals>."
            ),
            context="",  # the pictures: `write_images` puts them in a folder, the run's context
            gold={"ids": over, "sum": total},
            spec={"images": n, "receipts": n_receipts, "threshold": THRESHOLD},
            key={"truth": truth},
            source=self.sources["png"],
        )

    def generate_sized(self, size_tokens: int, index: int, seed: int) -> EvalItem:
        """The item of an eval size: a picture per `TOKENS_PER_PICTURE` tokens (at least 6), named as
        the runner names items (so a resumed run finds it)."""
        item = self.generate(size_tokens // TOKENS_PER_PICTURE, index, seed)
        item.id = item_id(self.name, "png", size_tokens, seed, index)
        item.size_tokens = size_tokens
        return item

    def score(self, answer: str, item: EvalItem) -> Score:
        ids_match = re.search(r"IDS:\s*([^;]*)", answer)
        sum_match = re.search(r"SUM:\s*([0-9.]+)", answer)
        ids = sorted(x.strip() for x in ids_match.group(1).split(",") if x.strip()) if ids_match else []
        ids_ok = float(ids == item.gold["ids"])
        sum_ok = float(bool(sum_match) and abs(float(sum_match.group(1)) - item.gold["sum"]) < 0.005)  # type: ignore[union-attr]
        return Score(ids_ok * sum_ok, {"ids": ids_ok, "sum": sum_ok})

    def root_turns(self, item: EvalItem) -> list[str]:
        return [
            repl(
                f"""
import re
pics = [d for d in context if d.get("image")]
replies = llm_query_batched([{READ!r}] * len(pics), images=[[d] for d in pics])
found = {{}}
for r in replies:
    m = re.match(r"RECEIPT (\\S+) TOTAL ([0-9.]+)", r.strip())
    if m:
        found[m.group(1)] = float(m.group(2))
over = sorted(k for k, v in found.items() if v > {THRESHOLD})
reply = "IDS: " + ", ".join(over) + "; SUM: " + format(sum(found[k] for k in over), ".2f")
print(len(pics), len(found), reply)
""",
                "Read every picture with a vision sub-call.",
            ),
            "FINAL_VAR(reply)",
        ]


def render(picture: dict[str, Any]) -> bytes:
    """One picture as PNG bytes: its kind, id and amount drawn as text."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (360, 200), "white")
    draw = ImageDraw.Draw(image)
    label = "TOTAL" if picture["kind"] == "RECEIPT" else "AMOUNT"
    lines = [picture["kind"], picture["id"], f"{label}: {picture['total']:.2f}"]
    draw.multiline_text((20, 20), "\n".join(lines), fill="black", spacing=12)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def write_images(item: EvalItem, folder: Path) -> Path:
    """The item's pictures as PNG files in `folder` (made if needed); the SHA-256 of each is kept in
    the item's key for the oracle."""
    folder.mkdir(parents=True, exist_ok=True)
    hashes: dict[str, str] = {}
    for name, picture in item.key["truth"].items():
        data = render(picture)
        (folder / name).write_bytes(data)
        hashes[hashlib.sha256(data).hexdigest()] = name
    item.key["sha256"] = hashes
    return folder


def oracle_read(messages: list[Message], item: EvalItem) -> str:
    """The oracle reader: the ground truth of the image it was given, found by its bytes."""
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                data = base64.b64decode(part["image_url"]["url"].partition(",")[2])
                name = item.key.get("sha256", {}).get(hashlib.sha256(data).hexdigest())
                if name is None:
                    return "OTHER"
                picture = item.key["truth"][name]
                if picture["kind"] != "RECEIPT":
                    return "OTHER"
                return f"RECEIPT {picture['id']} TOTAL {picture['total']:.2f}"
    return "OTHER"


def receipts_oracle(item: EvalItem) -> tuple[Any, Any]:
    """A scripted root (the program a sound RLM writes) and the oracle reader, a declared vision model."""
    from rlmx.testing import FunctionLM

    turns = Receipts().root_turns(item)

    def root(messages: list[Message], settings: CallSettings) -> str:
        done = sum(1 for m in messages if m.get("role") == "assistant")
        return turns[min(done, len(turns) - 1)]

    def reader(messages: list[Message], settings: CallSettings) -> str:
        return oracle_read(messages, item)

    reader_lm = FunctionLM(reader, name="oracle:receipts-reader")
    reader_lm.vision = True  # type: ignore[attr-defined]
    return FunctionLM(root, name="oracle:root"), reader_lm
