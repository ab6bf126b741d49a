"""Prompt profiles, `max_errors` and sampling settings outside `rlmx ask`: `rlmx serve` (its flags and
its profile tables), `rlmx mcp` and `rlmx eval`, each through its real client (the openai client, the
official mcp client, the command line) against the scripted model server, which records what the root
model was sent."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import openai
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from policies import repl
from rlmx.config import Config
from rlmx.engine.profiles import PromptProfile
from rlmx.errors import ConfigError
from rlmx.evals import load_records
from rlmx.evals.cache import ResponseStore
from rlmx.evals.runner import cache_tag
from rlmx.lm.base import CallSettings
from rlmx.serve.profiles import choose_profiles
from rlmx.spec.options import RunOptions
from rlmx.testing import ScriptedModel, ScriptedServer
from serve_helpers import TOKEN, ServeProcess, rlmx_serve

RLMX = [sys.executable, "-m", "rlmx.cli"]
QUESTION = "What is six times seven?"
TEXT = "The numbers six and seven appear in this note, and nothing else of interest. " * 4
# two turns that end the same way under every profile: the answer dict is accepted in any run
TWO_TURNS = [
    repl("x = 6 * 7\nprint('seen', x)"),
    repl('answer["content"] = str(x)\nanswer["ready"] = True'),
]


def roots_of(srv: ScriptedServer, since: int = 0) -> list[Any]:
    """The root RLM's own turn requests (depth 0) received from request `since` on."""
    return [r for r in srv.requests[since:] if r.purpose == "root"]


def assert_official_shapes(roots: list[Any], turns: int) -> None:
    """The message shapes of the `official` profile, as a checkpoint trained on the official runtime
    expects them (tests/engine/test_official_contract.py checks them in detail)."""
    assert len(roots) == 2
    opening = roots[0].messages
    assert opening[0]["role"] == "system" and 'answer["ready"] = True' in opening[0]["content"]
    assert "FINAL(" not in opening[0]["content"]
    assert opening[1]["role"] == "user" and opening[1]["content"].startswith("Answer the following:")
    assert opening[2]["role"] == "user" and opening[2]["content"].endswith(f"Turn 1/{turns}:")
    second = roots[1].messages
    feedback, turn = second[-2]["content"], second[-1]["content"]
    assert feedback.startswith("REPL output:") and "seen 42" in feedback
    assert "REPL variables: ['x']" in feedback
    assert turn == f"Turn 2/{turns}:"


def assert_rlmx_shapes(roots: list[Any]) -> None:
    opening = roots[0].messages
    assert len(opening) == 2 and not opening[1]["content"].startswith("Answer the following")
    assert re.search(r"Question: .+$", opening[1]["content"])
    assert "FINAL(" in opening[0]["content"]
    assert not any(m["content"].startswith("Turn ") for r in roots for m in r.messages)


def one_line_exit_2(proc: subprocess.CompletedProcess[str], expected: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("rlmx: error: ") and expected in lines[0], proc.stderr


def rlmx(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "RLMX_SERVE_TOKEN": TOKEN, **(env or {})}
    return subprocess.run(
        [*RLMX, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer(ScriptedModel(root=TWO_TURNS, sub="sub reply")) as server:
        yield server


def chat(serve: ServeProcess, model: str, **extra: Any) -> Any:
    client = openai.OpenAI(base_url=serve.url, api_key=TOKEN, max_retries=0, timeout=120)
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"rlmx": {"text": TEXT, **extra}},
    )


# --- rlmx serve ---------------------------------------------------------------------------------------


def test_a_serve_profile_table_chooses_the_official_prompt(srv: ScriptedServer, tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        f'[defaults]\nbase_url = "{srv.url}"\nmax_iterations = 5\n\n'
        '[profiles.trained]\nmodel = "openai:scripted"\nprompt = "official"\n'
        'system_prompt_append = "Always answer in digits."\n\n'
        '[profiles.plain]\nmodel = "openai:scripted"\n'
    )
    with rlmx_serve("--profiles", str(profiles), env={"XDG_STATE_HOME": str(tmp_path / "state")}) as serve:
        trained = chat(serve, "rlmx/trained")
        official_roots = roots_of(srv)
        seen = len(srv.requests)
        plain = chat(serve, "rlmx/plain")
        plain_roots = roots_of(srv, seen)
        client = openai.OpenAI(base_url=serve.url, api_key=TOKEN, max_retries=0)
        cards = {m.id: m.model_extra["rlmx"] for m in client.models.list().data}
    assert trained.choices[0].message.content == "42" and plain.choices[0].message.content == "42"
    assert_official_shapes(official_roots, turns=5)
    assert official_roots[0].messages[0]["content"].rstrip().endswith("Always answer in digits.")
    assert_rlmx_shapes(plain_roots)
    assert cards["rlmx/trained"]["prompt"] == "official" and cards["rlmx/plain"]["prompt"] == "rlmx"


def test_serve_prompt_flags_make_the_served_profile_official(srv: ScriptedServer, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("Mind the units.\n")
    args = ["--model", "openai:scripted", "--base-url", srv.url, "--max-iterations", "4"]
    args += ["--prompt", "official", "--system-prompt-append", f"@{notes}", "--max-errors", "3"]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(tmp_path / "state")}) as serve:
        completion = chat(serve, "rlmx/scripted")
        client = openai.OpenAI(base_url=serve.url, api_key=TOKEN, max_retries=0)
        card = client.models.list().data[0].model_extra["rlmx"]
    assert completion.choices[0].message.content == "42"
    roots = roots_of(srv)
    assert_official_shapes(roots, turns=4)
    assert roots[0].messages[0]["content"].rstrip().endswith("Mind the units.")
    assert card["prompt"] == "official" and card["limits"]["max_errors"] == 3


def test_a_request_may_lower_max_errors_and_the_run_stops_by_it(tmp_path: Path) -> None:
    failing = ScriptedModel(root=[repl("raise ValueError('no luck')")], final="FINAL(gave up)")
    with ScriptedServer(failing) as model_srv:
        args = ["--model", "openai:scripted", "--base-url", model_srv.url, "--max-iterations", "6"]
        with rlmx_serve(*args, env={"XDG_STATE_HOME": str(tmp_path / "state")}) as serve:
            completion = chat(serve, "rlmx/scripted", max_errors=2)
        turns = [r for r in roots_of(model_srv)]
    info = completion.model_extra["rlmx"]
    assert info["stopped_by"] == "max_errors" and info["iterations"] == 2 and len(turns) == 2
    assert completion.choices[0].message.content == "gave up"
    assert completion.choices[0].finish_reason == "length"


def test_serve_refuses_a_bad_prompt_profile_at_start_up(tmp_path: Path) -> None:
    flags = rlmx(
        "serve",
        "--port",
        "0",
        "--model",
        "openai:x",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--prompt",
        "nope",
    )
    one_line_exit_2(flags, "prompt profile 'nope' is neither 'rlmx', 'official' nor a readable template file")
    table = tmp_path / "profiles.toml"
    table.write_text(
        '[profiles.odd]\nmodel = "openai:x"\nbase_url = "http://127.0.0.1:9/v1"\nprompt = "nope"\n'
    )
    from_table = rlmx("serve", "--port", "0", "--profiles", str(table))
    one_line_exit_2(from_table, "profile 'odd': prompt profile 'nope'")
    beside = rlmx("serve", "--port", "0", "--profiles", str(table), "--prompt", "official")
    one_line_exit_2(beside, "--prompt describes the profile made from --model")
    append = rlmx(
        "serve",
        "--port",
        "0",
        "--model",
        "openai:x",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--system-prompt-append",
        f"@{tmp_path / 'missing.md'}",
    )
    one_line_exit_2(append, "--system-prompt-append: cannot read")


def test_profile_tables_take_prompt_keys_over_the_config_file() -> None:
    config = Config(prompt="official", system_prompt_append="from the config")
    tables = {"own": {"model": "openai:a", "prompt": "rlmx"}, "inherits": {"model": "openai:a"}}
    served, _ = choose_profiles(Config(**{**vars(config), "profiles": tables}))
    assert served["own"].prompt_profile().name == "rlmx"
    assert served["inherits"].prompt_profile().name == "official"
    assert served["own"].prompt_profile().append == "from the config"
    flag_options = RunOptions(model="openai:a", system_prompt_append="from the flag")
    flagged, _ = choose_profiles(config, options=flag_options)
    profile = next(iter(flagged.values()))
    assert profile.prompt_profile().name == "official" and profile.prompt_profile().append == "from the flag"
    with pytest.raises(ConfigError, match="prompt must be a string"):
        choose_profiles(Config(profiles={"bad": {"model": "openai:a", "prompt": 3}}))


# --- rlmx mcp -----------------------------------------------------------------------------------------


def test_mcp_ask_under_the_official_prompt(srv: ScriptedServer, tmp_path: Path) -> None:
    args = ["-m", "rlmx.cli", "mcp", "--model", "openai:scripted", "--base-url", srv.url]
    args += ["--max-iterations", "5", "--prompt", "official", "--max-errors", "2"]
    params = StdioServerParameters(
        command=sys.executable, args=args, env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    )

    async def go() -> mcp_types.CallToolResult:
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool("ask", {"question": QUESTION, "text": TEXT})

    result = asyncio.run(go())
    text = "\n".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))
    assert not result.is_error and text.startswith("42\n"), text
    assert_official_shapes(roots_of(srv), turns=5)


def test_mcp_refuses_a_bad_prompt_profile_at_start_up() -> None:
    proc = rlmx("mcp", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1", "--prompt", "nope")
    one_line_exit_2(proc, "prompt profile 'nope' is neither")


# --- rlmx eval ----------------------------------------------------------------------------------------

EVAL_TURNS = [
    repl("note = llm_query('summarise: ' + context[:50])\nprint(len(note))"),
    repl('answer["content"] = "1234567"\nanswer["ready"] = True'),
]


def run_eval(srv: ScriptedServer, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return rlmx(
        "eval", "--suite", "niah", "--sizes", "1k", "--n", "1", "--baselines", "direct",
        "--model", "openai:scripted", "--base-url", srv.url, "--max-iterations", "4",
        "--out", str(out), "-q", *extra,
        timeout=300,
    )  # fmt: skip


def sampling_sent(requests: list[Any], purpose: str | None) -> list[float | None]:
    return [r.body.get("temperature") for r in requests if r.purpose == purpose]


def test_eval_sends_its_settings_and_never_reuses_replies_made_under_others(tmp_path: Path) -> None:
    out = tmp_path / "res"
    with ScriptedServer(ScriptedModel(root=EVAL_TURNS, sub="a note")) as srv:
        first = run_eval(srv, out, "--prompt", "official", "--temperature", "0.3", "--sub-temperature",
                         "0.9", "--max-errors", "2")  # fmt: skip
        assert first.returncode == 0, first.stderr
        requests = srv.requests
        assert_official_shapes_eval(requests)
        assert sampling_sent(requests, "root") == [0.3, 0.3]  # the root's turns
        assert sampling_sent(requests, "llm_query") == [0.9]  # the sub-model (the root model here)
        assert sampling_sent(requests, None) == [0.3]  # the direct baseline calls the root model
        records = {r["method"]: r for r in load_records(out)}
        assert records["rlm"]["answer"] == "1234567" and records["rlm"]["prompt"] == "official"
        assert records["rlm"]["sampling"] == {"root": {"temperature": 0.3}, "sub": {"temperature": 0.9}}
        assert records["direct"]["prompt"] is None
        assert records["direct"]["sampling"] == {"root": {"temperature": 0.3}}
        identity = json.loads((out / "config.json").read_text())["identity"]
        assert identity["prompt"] == "official" and identity["limits"]["max_errors"] == 2
        assert identity["sampling"] == {"root": {"temperature": 0.3}, "sub": {"temperature": 0.9}}

        # the same folder, other settings, results kept: refused before any request
        seen = len(srv.requests)
        refused = run_eval(srv, out, "--prompt", "official", "--temperature", "0.5", "--sub-temperature",
                           "0.9", "--max-errors", "2")  # fmt: skip
        one_line_exit_2(refused, "holds results of another configuration")
        assert len(srv.requests) == seen

        # results gone, cache kept: a run under another root temperature asks the model again, except
        # for the sub-call, whose settings and prompt profile did not change
        (out / "results.jsonl").unlink()
        again = run_eval(srv, out, "--prompt", "official", "--temperature", "0.5", "--sub-temperature",
                         "0.9", "--max-errors", "2")  # fmt: skip
        assert again.returncode == 0, again.stderr
        fresh = srv.requests[seen:]
        assert sampling_sent(fresh, "root") == [0.5, 0.5] and sampling_sent(fresh, None) == [0.5]
        assert sampling_sent(fresh, "llm_query") == []
        records = {r["method"]: r for r in load_records(out)}
        assert records["direct"]["cache_hits"] == 0 and records["rlm"]["cache_hits"] == 1

        # the same settings once more are answered from the cache: no request at all
        seen = len(srv.requests)
        (out / "results.jsonl").unlink()
        cached = run_eval(srv, out, "--prompt", "official", "--temperature", "0.5", "--sub-temperature",
                          "0.9", "--max-errors", "2")  # fmt: skip
        assert cached.returncode == 0, cached.stderr
        assert len(srv.requests) == seen
        assert all(r["cache_hits"] >= 1 for r in load_records(out))

        # the default prompt profile at the same settings: the RLM's calls are asked again, the sub-call
        # too (same messages, another profile); the baseline, which has no profile, is reused
        (out / "results.jsonl").unlink()
        plain = run_eval(srv, out, "--temperature", "0.5", "--sub-temperature", "0.9", "--max-errors", "2")
        assert plain.returncode == 0, plain.stderr
        fresh = srv.requests[seen:]
        assert sampling_sent(fresh, "root") == [0.5, 0.5] and sampling_sent(fresh, "llm_query") == [0.9]
        assert sampling_sent(fresh, None) == []
        assert {r["method"]: r["prompt"] for r in load_records(out)} == {"rlm": "rlmx", "direct": None}


def assert_official_shapes_eval(requests: list[Any]) -> None:
    roots = [r for r in requests if r.purpose == "root"]
    assert roots[0].messages[1]["content"].startswith("Answer the following:")
    assert roots[0].messages[2]["content"].endswith("Turn 1/4:")
    assert roots[1].messages[-1]["content"] == "Turn 2/4:"
    assert "REPL variables:" in roots[1].messages[-2]["content"]


def test_eval_refuses_a_bad_prompt_profile_before_writing_anything(tmp_path: Path) -> None:
    out = tmp_path / "res"
    proc = rlmx("eval", "--suite", "niah", "--sizes", "1k", "--n", "1", "--model", "openai:scripted",
                "--base-url", "http://127.0.0.1:9/v1", "--prompt", "nope", "--out", str(out))  # fmt: skip
    one_line_exit_2(proc, "prompt profile 'nope' is neither")
    assert not out.exists()


def test_the_eval_cache_key_is_unchanged_without_settings_and_differs_with_them() -> None:
    messages = [{"role": "user", "content": "hello"}]
    settings = CallSettings(max_output_tokens=64)
    before = hashlib.sha256(json.dumps(["m", messages, 64, None], sort_keys=True).encode()).hexdigest()
    assert ResponseStore.key("m", messages, settings) == before  # caches written earlier are still read
    assert ResponseStore.key("m", messages, settings, {}, None) == before
    keys = {
        ResponseStore.key("m", messages, settings, {"temperature": 0.3}),
        ResponseStore.key("m", messages, settings, {"temperature": 0.5}),
        ResponseStore.key("m", messages, settings, {"temperature": 0.3}, "official"),
        ResponseStore.key("m", messages, settings, None, "official"),
        before,
    }
    assert len(keys) == 5


def test_the_rlm_s_cache_tag_names_its_profile_and_what_was_appended() -> None:
    assert cache_tag(PromptProfile.of("rlmx")) is None  # the key of caches written before profiles
    assert cache_tag(PromptProfile.of("official")) == "official"
    tags = {cache_tag(PromptProfile.of(name, append=text)) for name in ("rlmx", "official") for text in "ab"}
    assert len(tags) == 4 and None not in tags
