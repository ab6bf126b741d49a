"""Two mistakes with an OpenAI-compatible base URL, said at once instead of after the retry schedule:
nothing listening on a loopback port (a local server not started, or a wrong port), and a base URL
missing its `/v1` (the server answers 404 there, but `/v1` answers)."""

from __future__ import annotations

import errno
from urllib.parse import urlparse, urlunparse

import openai

from rlmx.lm.retry import Classifier, Failure

REFUSED_ATTEMPTS = 2  # a refused loopback first call: one quick retry, then the error


def connection_refused(exc: BaseException) -> bool:
    """Whether `exc` (an SDK connection error) was caused by a refused connection (ECONNREFUSED)."""
    if not isinstance(exc, openai.APIConnectionError) or isinstance(exc, openai.APITimeoutError):
        return False
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 16:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if (
            isinstance(current, ConnectionRefusedError)
            or getattr(current, "errno", None) == errno.ECONNREFUSED
        ):
            return True
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
    return False


def refused_fast(classify: Classifier, url: str) -> Classifier:
    """`classify`, except that a second refused connection in a row is final: for a loopback endpoint
    that has not answered yet, where a server that is not listening will not start listening by
    itself within the retry schedule. Made per logical call (it counts that call's refusals)."""
    refusals = 0

    def judge(exc: Exception) -> Failure | None:
        nonlocal refusals
        failure = classify(exc)
        if failure is None or not connection_refused(exc):
            return failure
        refusals += 1
        if refusals < REFUSED_ATTEMPTS:
            return failure
        return Failure("connection refused: nothing is listening there (is the server running?)", False)

    return judge


def v1_url(base_url: str | None) -> str | None:
    """`base_url` with `/v1` added when its path has none (None when it already has one)."""
    if not base_url:
        return None
    parsed = urlparse(base_url)
    path = parsed.path.rstrip("/")
    if "v1" in path.split("/"):
        return None
    return urlunparse(parsed._replace(path=f"{path}/v1"))


async def v1_hint(client: openai.AsyncOpenAI, base_url: str | None) -> str:
    """After a 404 from `base_url`: " (did you mean BASE/v1?)" when `BASE/v1/models` answers (one cheap
    GET), else ""."""
    hinted = v1_url(base_url)
    if hinted is None:
        return ""
    try:
        await client.with_options(base_url=hinted, timeout=3.0).get("/models", cast_to=object)
    except openai.APIStatusError as exc:
        if exc.status_code == 404 or exc.status_code >= 500:
            return ""  # 401/403/405...: something is there
    except (openai.APIError, OSError, ValueError):
        return ""
    return f" (did you mean {hinted}?)"


def with_hint(exc: Exception, hint: str) -> None:
    """Mark an SDK error with the hint its one-line message ends with."""
    exc.rlmx_hint = hint  # type: ignore[attr-defined]
