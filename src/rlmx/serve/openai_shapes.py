"""The OpenAI wire shapes rlmx serve answers with: completions, stream chunks, usage, errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rlmx.rlm import RunResult

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
}
ERROR_CODES = {
    401: "invalid_api_key",
    403: "path_not_allowed",
    404: "not_found",
    413: "request_too_large",
    429: "server_busy",
    500: "run_failed",
}


def error_body(
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    rlmx: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code or ERROR_CODES.get(status),
        }
    }
    if rlmx is not None:
        body["rlmx"] = rlmx
    return body


def internal_error_body(
    trace_id: str, message: str = "internal error", code: str = "internal_error"
) -> dict[str, Any]:
    """A 500 that tells the client nothing of the cause, only the id to quote (the server log has the rest)."""
    return error_body(500, f"{message}; trace id {trace_id}", code=code)


def usage_of(usage: dict[str, Any]) -> dict[str, Any]:
    """The whole run tree's tokens in OpenAI's usage shape."""
    prompt = int(usage.get("input_tokens", 0))
    completion = int(usage.get("output_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))},
        "completion_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))},
    }


def run_info(result: RunResult) -> dict[str, Any]:
    return {
        "trace_id": result.run_id,
        "trace_path": result.trace_path,
        "stopped_by": result.stopped_by,
        "iterations": result.iterations,
        "elapsed_s": round(result.elapsed_s, 3),
        "usage": result.usage,
        "error": result.error,
    }


def answer_content(result: RunResult) -> str:
    answer = result.answer
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)


def finish_reason(result: RunResult) -> str:
    return "stop" if result.stopped_by == "final" else "length"


@dataclass
class Failure:
    """A run that gave no usable answer: what the client is told, and the detail for the server log."""

    status: int
    code: str
    message: str  # for the client: no internal detail in a 500
    detail: str  # for the server log


def failure(result: RunResult, typed: bool) -> Failure | None:
    """How a run that gives no usable answer is answered; None when it gives one."""
    if typed and result.parsed is None and result.answer is not None:
        message = result.error or "the answer did not match the output schema"
        return Failure(422, "output_validation_failed", message, message)
    detail = result.error or "no detail"
    if result.stopped_by == "error":
        if "model call failed" in detail or "answer call failed" in detail:
            return Failure(502, "upstream_model_error", detail, detail)
        return Failure(500, "run_failed", f"internal error; trace id {result.run_id}", detail)
    if result.answer is None:
        message = f"the run ended by {result.stopped_by} without an answer; trace id {result.run_id}"
        return Failure(500, "no_answer", message, detail)
    return None


def failure_body(problem: Failure, result: RunResult) -> dict[str, Any]:
    info = run_info(result)
    if problem.status >= 500 and problem.status != 502:
        info["error"] = None  # the detail stays in the server log and the trace
    return error_body(problem.status, problem.message, code=problem.code, rlmx=info)


def completion(result: RunResult, model: str, created: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{result.run_id}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer_content(result), "refusal": None},
                "finish_reason": finish_reason(result),
                "logprobs": None,
            }
        ],
        "usage": usage_of(result.usage),
        "rlmx": run_info(result),
    }


def chunk(
    run_id: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    *,
    finish: str | None = None,
    rlmx: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    if rlmx is not None:
        out["rlmx"] = rlmx
    return out


def usage_chunk(run_id: str, model: str, created: int, result: RunResult) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_of(result.usage),
    }


def sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return f"data: {text}\n\n".encode()
