"""`rlmx serve` sessions and tools: a caller's questions in one REPL through the official `openai` client
(`"session"` in `extra_body`'s `rlmx` object), unknown and expired ids refused, the bound on their number,
their workers gone on expiry and on shutdown; a profile's own tools, run in the server's process. Real
server processes backed by the scripted model."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from policies import question, repl, turn
from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, alive, descendants, rlmx_serve, wait_until


def policy(messages: list[dict[str, Any]], request: Any) -> str:
    if request.purpose == "final":
        return "FINAL(forced)"
    if request.purpose != "root":
        return "sub reply"
    asked, t = question(messages).splitlines()[0], turn(messages)
    if asked == "remember seven":
        return repl("kept = 7") if t == 0 else "FINAL(stored)"
    if asked == "recall":
        return repl("FINAL(str(kept) + ':' + context_1)")
    if asked == "call the tool":
        return repl("FINAL(str(server_pid()) + ':' + str(LIMIT))")
    return "FINAL(unscripted)"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy) as srv:
        yield srv


def serve(srv: ScriptedServer, tmp_path: Path, *args: str) -> Any:
    base = ["--model", "openai:scripted", "--base-url", srv.url]
    return rlmx_serve(*base, *args, env={"XDG_STATE_HOME": str(tmp_path / "state")})


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=TOKEN, max_retries=0, timeout=120)


def ask(url: str, asked: str, **rlmx: Any) -> Any:
    """The raw response (headers, then `.parse()`)."""
    return client(url).chat.completions.with_raw_response.create(
        model="rlmx/scripted", messages=[{"role": "user", "content": asked}], extra_body={"rlmx": rlmx}
    )


def session_of(raw: Any) -> str:
    body = raw.parse()
    sid = raw.headers["x-rlmx-session"]
    assert body.model_extra["rlmx"]["session"] == sid
    return sid


def test_a_session_keeps_the_repl_between_requests(model_server: ScriptedServer, tmp_path: Path) -> None:
    with serve(model_server, tmp_path) as proc:
        first = ask(proc.url, "remember seven", session="new", text="first text")
        assert first.parse().choices[0].message.content == "stored"
        sid = session_of(first)
        assert len(sid) == 32 and int(sid, 16) >= 0  # the session's own id: 128 random bits
        second = ask(proc.url, "recall", session=sid, text="second text")
        assert second.parse().choices[0].message.content == "7:second text"  # its context is context_1
        assert session_of(second) == sid
        assert "x-rlmx-session" not in ask(proc.url, "say anything").headers  # no session asked for


def test_unknown_ids_and_bad_values_are_refused(model_server: ScriptedServer, tmp_path: Path) -> None:
    with serve(model_server, tmp_path) as proc:
        with pytest.raises(openai.NotFoundError) as caught:
            ask(proc.url, "recall", session="0" * 32)
        assert "no open session" in caught.value.message and '"session": "new"' in caught.value.message
        assert caught.value.body["code"] == "session_not_found"
        with pytest.raises(openai.BadRequestError, match=r"rlmx\.session must be"):
            ask(proc.url, "recall", session=7)


def test_an_expired_session_is_a_404_and_its_workers_are_gone(
    model_server: ScriptedServer, tmp_path: Path
) -> None:
    with serve(model_server, tmp_path, "--session-idle-s", "1.5") as proc:
        sid = session_of(ask(proc.url, "remember seven", session="new"))
        workers = descendants(proc.proc.pid)
        assert workers  # the session's REPL (and its zygote) outlive the request
        wait_until(lambda: not any(alive(pid) for pid in workers), "the expired session's workers to end", 30)
        with pytest.raises(openai.NotFoundError, match="expired"):
            ask(proc.url, "recall", session=sid)


def test_too_many_sessions_is_a_429_and_shutdown_frees_their_workers(
    model_server: ScriptedServer, tmp_path: Path
) -> None:
    with serve(model_server, tmp_path, "--max-sessions", "1") as proc:
        sid = session_of(ask(proc.url, "remember seven", session="new", text="first"))
        with pytest.raises(openai.RateLimitError) as caught:
            ask(proc.url, "remember seven", session="new")
        assert caught.value.body["code"] == "too_many_sessions" and "limit is 1" in caught.value.message
        assert (
            ask(proc.url, "recall", session=sid, text="more").parse().choices[0].message.content == "7:more"
        )
        workers = descendants(proc.proc.pid)
        assert workers
    # the server stopped (SIGTERM): its open session was closed, its workers with it
    wait_until(
        lambda: "rlmx serve: closed 1 open session\n" in proc.log(), "the server to log the closing", 30
    )
    wait_until(lambda: not any(alive(pid) for pid in workers), "the workers to end with the server", 30)


def test_a_profiles_tools_run_in_the_server_process(model_server: ScriptedServer, tmp_path: Path) -> None:
    (tmp_path / "servetools_for_test.py").write_text(
        "import os\n\ndef server_pid() -> int:\n    '''The pid of the process running this tool.'''\n"
        "    return os.getpid()\n\nTOOLS = {'server_pid': server_pid}\nMORE = {'LIMIT': 5}\n"
    )
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        f'[profiles.tooled]\nmodel = "openai:scripted"\nbase_url = "{model_server.url}"\n'
        'tools = ["servetools_for_test:TOOLS"]\n'
    )
    env = {
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    args = ["--profiles", str(profiles), "--tools", "servetools_for_test:MORE"]
    with rlmx_serve(*args, env=env) as proc:
        answer = client(proc.url).chat.completions.create(
            model="rlmx/tooled", messages=[{"role": "user", "content": "call the tool"}]
        )
        assert answer.choices[0].message.content == f"{proc.proc.pid}:5"


def test_a_profile_whose_tools_cannot_be_imported_stops_the_server(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        '[profiles.p]\nmodel = "openai:x"\nbase_url = "http://127.0.0.1:9"\ntools = ["nope_mod:T"]\n'
    )
    with pytest.raises(RuntimeError, match="profile 'p': --tools 'nope_mod:T': cannot import"):
        with rlmx_serve("--profiles", str(profiles), env={"XDG_STATE_HOME": str(tmp_path / "state")}):
            pass


def test_a_streamed_question_names_its_session_and_a_session_keeps_its_model(
    model_server: ScriptedServer, tmp_path: Path
) -> None:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        "".join(
            f'[profiles.{name}]\nmodel = "openai:scripted"\nbase_url = "{model_server.url}"\n'
            for name in ("one", "two")
        )
    )
    with rlmx_serve("--profiles", str(profiles), env={"XDG_STATE_HOME": str(tmp_path / "state")}) as proc:
        stream = client(proc.url).chat.completions.create(
            model="rlmx/one",
            messages=[{"role": "user", "content": "remember seven"}],
            stream=True,
            extra_body={"rlmx": {"session": "new", "text": "first"}},
        )
        infos = [c.model_extra["rlmx"] for c in stream if (c.model_extra or {}).get("rlmx")]
        sid = infos[0]["session"]
        assert infos[0]["event"] == "accepted" and infos[-1]["session"] == sid
        assert infos[-1]["stopped_by"] == "final"
        with pytest.raises(openai.BadRequestError, match="belongs to the model 'rlmx/one'") as caught:
            client(proc.url).chat.completions.create(
                model="rlmx/two",
                messages=[{"role": "user", "content": "recall"}],
                extra_body={"rlmx": {"session": sid}},
            )
        assert caught.value.body["code"] == "session_model_mismatch"
        again = client(proc.url).chat.completions.create(
            model="rlmx/one",
            messages=[{"role": "user", "content": "recall"}],
            extra_body={"rlmx": {"session": sid, "text": "second"}},
        )
        assert again.choices[0].message.content == "7:second"
