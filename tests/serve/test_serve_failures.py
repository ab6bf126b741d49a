"""`rlmx serve` at its edges: the request log, 500s that name only a trace id, its own trace folder,
contexts with no usable text, the port check. Real processes and the official `openai` client; the
internal errors are provoked in-process (test doubles in the app, served by uvicorn in a thread)."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from policies import is_rlm
from rlmx.errors import ConfigError, EmptyContext, SandboxUnavailable
from rlmx.rlm import RunResult
from rlmx.serve.app import create_app
from rlmx.serve.profiles import ServedProfile
from rlmx.serve.settings import ServeSettings
from rlmx.spec.options import RunOptions
from rlmx.testing import Fault, ScriptedRequest, ScriptedServer
from serve_helpers import (
    TOKEN,
    Router,
    ServeProcess,
    alive,
    app_in_thread,
    descendants,
    rlmx_serve,
    wait_until,
)

SECRET = "/srv/private/keys/sk-live-0000"  # stands for any internal detail a failure may carry
LOG_LINE = re.compile(
    r"^\S+ \S+ (?P<level>INFO|WARNING|ERROR) rlmx serve: (?P<id>[0-9a-f]{12}) (?P<method>[A-Z]+) "
    r"(?P<path>\S+) (?P<status>\d{3}|-) (?P<took>[\d.]+ m?s)(?P<rest>.*)$"
)


def upstream_refuses(request: ScriptedRequest) -> Fault | None:
    """The model behind the server answers 400 (not retried) to the question "upstream fails"."""
    if any("upstream fails" in str(m.get("content")) for m in request.messages):
        return Fault.status(400, message="scripted refusal")
    return None


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Router(), faults=upstream_refuses) as srv:
        yield srv


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("edges")
    root = base / "root"
    (root / "binaries").mkdir(parents=True)
    (root / "binaries" / "a.bin").write_bytes(b"\x00\x01\x02" * 100)
    (root / "binaries" / ".hidden.txt").write_text("hidden text is not read")
    (root / "empty.txt").write_text("")
    (root / "blank.txt").write_text("  \n\n\t\n")
    (root / "notes.txt").write_text("some notes")
    return base


@pytest.fixture(scope="module")
def serve(model_server: ScriptedServer, files: Path) -> Iterator[ServeProcess]:
    args = ["--model", "openai:scripted", "--base-url", model_server.url, "--root", str(files / "root")]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(files / "state")}) as proc:
        yield proc


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=TOKEN, max_retries=0, timeout=120)


def ask(url: str, text: str, **kw: Any) -> Any:
    return client(url).chat.completions.create(
        model="rlmx/scripted", messages=[{"role": "user", "content": text}], **kw
    )


def log_lines(serve: ServeProcess, request_id: str) -> list[re.Match[str]]:
    """The request log lines of one request (waits for them: the line is written as the response ends)."""

    def found() -> list[re.Match[str]]:
        matches = [LOG_LINE.match(line.rstrip("\n")) for line in list(serve.stderr)]
        return [m for m in matches if m and m["id"] == request_id]

    wait_until(lambda: found(), f"the log line of request {request_id}", 30)
    return found()


# --- the request log -------------------------------------------------------------------------------------
def test_every_request_gets_an_info_line_at_the_default_level(serve: ServeProcess) -> None:
    raw = client(serve.url).chat.completions.with_raw_response.create(
        model="rlmx/scripted", messages=[{"role": "user", "content": "say hello"}]
    )
    trace_id = raw.headers["x-rlmx-trace-id"]
    assert raw.parse().choices[0].message.content == "hello from rlmx"
    (line,) = log_lines(serve, trace_id)  # the request id is the run's trace id
    assert (line["level"], line["method"], line["path"], line["status"]) == (
        "INFO",
        "POST",
        "/v1/chat/completions",
        "200",
    )
    assert line["rest"] == " stopped_by=final"
    with pytest.raises(openai.NotFoundError):
        client(serve.url).models.retrieve("rlmx/nope")
    wait_until(
        lambda: any(" GET /v1/models/rlmx/nope 404 " in line and " INFO " in line for line in serve.stderr),
        "the log line of the 404",
    )


def test_a_failed_run_is_a_warning_with_its_error_and_a_stream_logs_too(serve: ServeProcess) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        ask(serve.url, "upstream fails")
    assert info.value.status_code == 502 and info.value.body["code"] == "upstream_model_error"
    trace_id = info.value.response.headers["x-rlmx-trace-id"]
    (line,) = log_lines(serve, trace_id)
    assert line["level"] == "WARNING" and line["status"] == "502"
    assert " stopped_by=error error='upstream_model_error: model call failed" in line["rest"]
    assert "\n" not in line.group(0)
    stream = ask(serve.url, "work in steps", stream=True)
    chunks = list(stream)
    streamed = chunks[0].model_extra["rlmx"]["trace_id"]
    (done,) = log_lines(serve, streamed)
    assert done["level"] == "INFO" and done["status"] == "200" and done["rest"] == " stopped_by=final"


def test_log_level_warning_keeps_only_the_failures(model_server: ScriptedServer, files: Path) -> None:
    args = ["--model", "openai:scripted", "--base-url", model_server.url, "--log-level", "WARNING"]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(files / "state")}) as proc:
        ok = client(proc.url).chat.completions.with_raw_response.create(
            model="rlmx/scripted", messages=[{"role": "user", "content": "say hello"}]
        )
        with pytest.raises(openai.APIStatusError) as failed:
            ask(proc.url, "upstream fails")
        log_lines(proc, failed.value.response.headers["x-rlmx-trace-id"])
        assert ok.headers["x-rlmx-trace-id"] not in proc.log()
        below = descendants(proc.proc.pid)
    assert proc.proc.returncode is not None  # stopped, with nothing of it left running
    wait_until(lambda: not any(alive(pid) for pid in below), "the server's child processes to end", 30)
    refused = subprocess.run(
        [sys.executable, "-m", "rlmx.cli", "serve", "--log-level", "loud"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "'loud' is not one of debug, info, warning, error, critical" in refused.stderr


# --- 500s: a trace id for the client, the details for the log --------------------------------------------
class FailingRLM:
    """Stands in for an RLM: each question fails in its own way, with an internal detail in the error."""

    async def arun(self, question: str, context: Any = None, **kw: Any) -> RunResult:
        run_id = kw.get("run_id") or "0"
        if "crash" in question:
            raise RuntimeError(f"unexpected state in {SECRET}")
        if "sandbox" in question:
            raise SandboxUnavailable(f"cannot isolate model code: {SECRET} is not mounted")
        if "empty" in question:
            raise EmptyContext("the context holds no usable text: it is an empty str")
        if "config" in question:
            raise ConfigError("the question must be a non-empty string")
        if "no answer" in question:
            return RunResult(
                None, "max_iterations", 3, {}, None, 0.1, f"forced final failed: {SECRET}", run_id
            )
        return RunResult(None, "error", 1, {}, None, 0.1, f"REPL protocol violation near {SECRET}", run_id)


class FailingProfile(ServedProfile):
    def rlm(self, **kw: Any) -> Any:
        return FailingRLM()


@pytest.fixture(scope="module")
def failing_url() -> Iterator[str]:
    settings = ServeSettings(
        profiles={"scripted": FailingProfile("scripted", RunOptions(model="openai:x"))}, token=TOKEN
    )
    with app_in_thread(create_app(settings)) as url:
        yield url


@pytest.mark.parametrize(
    ("question", "code", "message"),
    [
        ("crash", "internal_error", "internal error; trace id {id}"),
        ("sandbox", "internal_error", "internal error; trace id {id}"),
        ("run failed", "run_failed", "internal error; trace id {id}"),
        ("no answer", "no_answer", "the run ended by max_iterations without an answer; trace id {id}"),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_500_names_the_trace_id_and_the_log_has_the_details(
    failing_url: str, caplog: pytest.LogCaptureFixture, question: str, code: str, message: str, stream: bool
) -> None:
    caplog.set_level(logging.INFO, logger="rlmx.serve")
    if stream:
        with pytest.raises(openai.APIError) as info:
            list(ask(failing_url, question, stream=True))
        body: Any = info.value.body
    else:
        with pytest.raises(openai.InternalServerError) as failed:
            ask(failing_url, question)
        assert failed.value.status_code == 500
        body = failed.value.body
    match = re.search(r"trace id ([0-9a-f]{12})", body["message"])
    assert match, body
    trace_id = match.group(1)
    assert body["message"] == message.format(id=trace_id) and body["code"] == code
    assert body["type"] == "server_error" and SECRET not in json.dumps(body)
    wait_until(lambda: trace_id in caplog.text, "the log line")
    lines = [r for r in caplog.records if r.name == "rlmx.serve" and trace_id in r.getMessage()]
    assert lines and lines[-1].levelno >= logging.WARNING
    assert SECRET in caplog.text  # the details are in the server log


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_config_error_from_the_run_start_is_a_400_with_its_message(failing_url: str, stream: bool) -> None:
    for question, code in [("empty", "empty_context"), ("config", None)]:
        with pytest.raises(openai.APIError) as info:
            if stream:
                list(ask(failing_url, question, stream=True))
            else:
                ask(failing_url, question)
        body: Any = info.value.body
        assert body["type"] == "invalid_request_error" and body["code"] == code
        assert body["message"] in (
            "the context holds no usable text: it is an empty str",
            "the question must be a non-empty string",
        )
        if not stream:
            assert isinstance(info.value, openai.BadRequestError)


def test_a_malformed_model_field_is_a_400_not_a_500(serve: ServeProcess) -> None:
    with pytest.raises(openai.BadRequestError, match="model must be a string"):
        client(serve.url).chat.completions.create(
            model=5,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "say hello"}],
        )


# --- a trace folder of its own -------------------------------------------------------------------------
def test_runs_are_traced_in_the_servers_own_folder(
    serve: ServeProcess, model_server: ScriptedServer, files: Path, tmp_path: Path
) -> None:
    info = ask(serve.url, "say hello").model_extra["rlmx"]
    trace = Path(info["trace_path"])
    assert trace.parent == files / "state" / "rlmx" / "serve-traces" and info["trace_id"] in trace.name
    assert trace.parent.stat().st_mode & 0o077 == 0  # the folder is its owner's only
    assert not (files / "state" / "rlmx" / "traces").exists()  # nothing in `rlmx ask`'s folder
    args = [
        "--model",
        "openai:scripted",
        "--base-url",
        model_server.url,
        "--trace-dir",
        str(tmp_path / "mine"),
    ]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(files / "state")}) as proc:
        mine = ask(proc.url, "say hello").model_extra["rlmx"]
    assert Path(mine["trace_path"]).parent == tmp_path / "mine"


# --- a context with no usable text ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("paths", "why"),
    [
        (["empty.txt"], "every file and text in it is empty or only whitespace"),
        (["blank.txt", "empty.txt"], "every file and text in it is empty or only whitespace"),
        (["binaries"], "no text file was found (binary, hidden and empty files are skipped)"),
    ],
)
def test_paths_with_no_usable_text_are_a_400_before_any_model_call(
    serve: ServeProcess, model_server: ScriptedServer, paths: list[str], why: str
) -> None:
    before = len([r for r in model_server.requests if is_rlm(r)])
    with pytest.raises(openai.BadRequestError) as info:
        ask(serve.url, "list the documents", extra_body={"rlmx": {"paths": paths}})
    body: Any = info.value.body
    assert body["code"] == "empty_context"
    assert (
        body["message"]
        == f"the context ({', '.join(paths)}) holds no usable text: {why}; name files with text in them"
    )
    assert len([r for r in model_server.requests if is_rlm(r)]) == before
    with_text = ask(serve.url, "list the documents", extra_body={"rlmx": {"paths": [*paths, "notes.txt"]}})
    assert 10 in json.loads(with_text.choices[0].message.content).values()  # one file with text is enough


def test_blank_inline_text_is_refused_too(serve: ServeProcess) -> None:
    with pytest.raises(openai.BadRequestError, match=r"the context \(text\) holds no usable text"):
        ask(serve.url, "list the documents", extra_body={"rlmx": {"text": "   "}})


# --- the port -----------------------------------------------------------------------------------------------
def serve_command(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rlmx.cli", "serve", "--no-auth", "--model", "openai:x", *args]
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env
    )


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_a_usage_error(tmp_path: Path, port: str) -> None:
    done = serve_command(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--port", port)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("rlmx: ") and "--port" in done.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = serve_command(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"rlmx: error: cannot listen on 127.0.0.1:{port}: the port is already in use; pick another --port "
        "(0: any free port) or stop what is listening there"
    ]
