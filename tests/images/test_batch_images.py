"""`rlmx batch`: a line's context may name image files; each item's sub-calls see that item's images."""

from __future__ import annotations

import base64
from pathlib import Path

import rlmx.batch
from images.support import picture
from rlmx import RLM, ModelOptions
from rlmx.testing import ScriptedModel, ScriptedServer

CELL = '```repl\nreply = llm_query("what is it?", images=[d for d in context if d.get("image")])\n```'


def test_batch_lines_may_name_image_files(tmp_path: Path) -> None:
    pictures = {name: picture("PNG", size) for name, size in (("a.png", (10, 10)), ("b.png", (20, 5)))}
    for name, data in pictures.items():
        (tmp_path / name).write_bytes(data)
    items = [
        {"id": name, "question": f"what is in {name}?", "context": [str(tmp_path / name)]}
        for name in pictures
    ]
    script = ScriptedModel(root=[CELL, "FINAL_VAR(reply)"], sub="a square")
    with ScriptedServer(script) as srv:
        rlm = RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url, api_key="k", vision=True))
        rows = list(rlmx.batch.run(items, rlm))
        requests = list(srv.requests)
    assert sorted(row["answer"] for row in rows) == ["a square", "a square"]
    sent = sorted(
        base64.b64decode(p["image_url"]["url"].partition(",")[2])
        for r in requests
        if r.headers.get("x-rlmx-purpose") == "llm_query"
        for p in r.body["messages"][0]["content"]
        if p["type"] == "image_url"
    )
    assert sent == sorted(pictures.values())
