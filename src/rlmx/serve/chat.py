"""An OpenAI chat-completions request -> one RLM run: question, context, profile, limits, output schema.

- `image_url` parts (data URLs; remote URLs only from an allow-list of hosts) become image documents of
  the context (rlmx.serve.images).
- The question is the last user message. Text parts longer than the context threshold (from any
  message) become context documents; a long single-text last user message keeps its last line (the
  text after its final newline) as the question and the rest becomes context.
- Earlier short messages (system prompt, conversation) go with the question as a short transcript; a
  transcript beyond the threshold becomes a context document of its own.
- An explicit `rlmx` object in the body (the openai client's `extra_body`) adds context from server files
  (`paths`, confined to the roots) or inline `text`, a `context_note`, and per-run limits that can only
  lower the profile's (`max_depth`, `max_iterations`, `max_llm_calls`, `max_total_tokens`, `budget_usd`,
  `timeout_s`, `max_errors`).
- `session` in the `rlmx` object: `"new"` starts a session (its REPL stays for the caller's next
  questions), an id given back by the server continues one (rlmx.serve.sessions).
- `response_format` `json_schema` (or `json_object`) makes it a typed run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlmx.errors import ConfigError, RLMError
from rlmx.limits import Limits
from rlmx.serve.profiles import OVERRIDES, ServedProfile, find_profile
from rlmx.typed import OutputSpec

RLMX_KEYS = {"paths", "text", "context_note", "session", *OVERRIDES}
IGNORED = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "user", "seed", "stop", "metadata")


class BadRequest(RLMError):
    """A request the server cannot serve; `status` and OpenAI's error `type` / `code` / `param` go back."""

    def __init__(
        self, message: str, status: int = 400, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code


@dataclass
class RunRequest:
    profile: ServedProfile
    question: str
    limits: Limits
    documents: list[dict[str, Any]] = field(default_factory=list)  # from messages and inline text
    paths: list[str] = field(default_factory=list)  # server files, loaded after admission
    images: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, image_url part)
    held: Any = None  # what must live as long as the run (the context of its images' folder)
    context_note: str | None = None
    output: OutputSpec | None = None
    stream: bool = False
    include_usage: bool = False
    session: str | None = None  # "new", or the id of a session to continue


def parse_chat_request(body: Any, profiles: dict[str, ServedProfile], *, threshold: int) -> RunRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise BadRequest("model must be a string, e.g. rlmx/NAME", param="model")
    try:
        profile = find_profile(profiles, body.get("model"))
    except ConfigError as exc:
        raise BadRequest(str(exc), 404, param="model", code="model_not_found") from exc
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported: one RLM run answers one request", param="n")
    if body.get("tools") or body.get("functions"):
        raise BadRequest("tools/functions are not supported by rlmx serve", param="tools")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", param="messages")
    question, documents, transcript = split_messages(messages, threshold)
    extra = body.get("rlmx") or {}
    if not isinstance(extra, dict):
        raise BadRequest("rlmx must be an object", param="rlmx")
    unknown = set(extra) - RLMX_KEYS
    if unknown:
        raise BadRequest(
            f"unknown rlmx option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(RLMX_KEYS))}",
            param="rlmx",
        )
    documents.extend(inline_texts(extra.get("text")))
    paths = extra.get("paths") or []
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise BadRequest("rlmx.paths must be a list of strings", param="rlmx.paths")
    if transcript:
        if len(transcript) > threshold:
            documents.insert(0, {"path": "conversation", "text": transcript})
        else:
            question = f"{transcript}\n\n{question}"
    session = extra.get("session")
    if session is not None and (not isinstance(session, str) or not session):
        raise BadRequest(
            'rlmx.session must be "new" (start a session) or the id the server gave', param="rlmx.session"
        )
    note = extra.get("context_note")
    stream_options = body.get("stream_options") or {}
    try:
        limits = profile.limits_for({k: v for k, v in extra.items() if k in OVERRIDES})
    except ConfigError as exc:
        raise BadRequest(str(exc), param="rlmx") from exc
    return RunRequest(
        profile=profile,
        question=question,
        limits=limits,
        documents=documents,
        paths=list(paths),
        images=image_parts(messages),
        context_note=str(note) if note else None,
        output=output_of(body.get("response_format")),
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        session=session,
    )


def message_texts(message: Any, index: int) -> list[str]:
    if not isinstance(message, dict) or "role" not in message:
        raise BadRequest(f"messages[{index}] must be an object with a role", param=f"messages[{index}]")
    content = message.get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise BadRequest(f"messages[{index}].content must be a string or a list of parts")
    texts = []
    for j, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "image_url":
            continue  # an image: a context document of its own (`image_parts`)
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise BadRequest(
                f"messages[{index}].content[{j}]: only text and image_url parts are supported",
                param=f"messages[{index}].content[{j}]",
            )
        texts.append(part["text"])
    return texts


def image_parts(messages: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The `image_url` parts of the messages, each named by where it is (its document's name)."""
    found = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            if isinstance(part, dict) and part.get("type") == "image_url":
                found.append((f"messages[{i}].content[{j}]", part))
    return found


def split_messages(messages: list[Any], threshold: int) -> tuple[str, list[dict[str, Any]], str]:
    """(question, context documents, transcript of the other short messages)."""
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), default=-1
    )
    if last_user < 0:
        raise BadRequest("there is no user message to take the question from", param="messages")
    documents: list[dict[str, Any]] = []
    transcript: list[str] = []
    question_parts: list[str] = []
    for i, message in enumerate(messages):
        texts = message_texts(message, i)
        for j, text in enumerate(texts):
            name = f"messages[{i}]" if len(texts) == 1 else f"messages[{i}].content[{j}]"
            if len(text) > threshold:
                if i == last_user and len(texts) == 1:
                    split = split_last_line(text, threshold)
                    if split is not None:
                        documents.append({"path": name, "text": split[0]})
                        question_parts.append(split[1])
                        continue
                documents.append({"path": name, "text": text})
            elif i == last_user:
                question_parts.append(text)
            elif text.strip():
                transcript.append(f"[{message['role']}] {text}")
    question = "\n".join(p for p in question_parts if p.strip()).strip()
    if not question and not message_texts(messages[last_user], last_user):
        raise BadRequest(
            "the last user message has no question: it holds no text part; add one with the question "
            "(its image parts become the context)",
            param="messages",
        )
    if not question:
        raise BadRequest(
            f"the last user message has no question: it is one text longer than the context threshold "
            f"({threshold:,} characters) with no short last line. Send the question as its own text part or "
            "as the message's last line, or pass the context in the `rlmx` object (extra_body)",
            param="messages",
        )
    return question, documents, ("Conversation so far:\n" + "\n".join(transcript)) if transcript else ""


def split_last_line(text: str, threshold: int) -> tuple[str, str] | None:
    """(context, question) of one long message that ends with a short line, else None.

    The question is the text after the message's last newline (trailing blank space ignored): what
    `cat file | llm "question"` sends (stdin and the prompt joined by a space) and what `llm -f file
    "question"` sends (joined by a newline). The rest, without its trailing line breaks, is the context."""
    head, sep, tail = text.rstrip().rpartition("\n")
    question = tail.strip()
    if not sep or not question or len(question) > threshold or not head.strip():
        return None
    return head.rstrip("\r\n"), question


def inline_texts(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise BadRequest("rlmx.text must be a string or a list of strings", param="rlmx.text")
    return [{"path": f"text[{i}]" if len(items) > 1 else "text", "text": t} for i, t in enumerate(items)]


def output_of(response_format: Any) -> OutputSpec | None:
    """OpenAI's `response_format` -> an output schema (None for plain text)."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise BadRequest("response_format must be an object", param="response_format")
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return OutputSpec({"type": "object"}, name="json_object")
    if kind != "json_schema":
        raise BadRequest(f"response_format type {kind!r} is not supported", param="response_format")
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(schema, dict):
        raise BadRequest(
            "response_format.json_schema.schema must be a JSON schema object", param="response_format"
        )
    try:
        return OutputSpec(schema, name=str(spec.get("name") or "answer"))
    except ConfigError as exc:
        raise BadRequest(str(exc), param="response_format") from exc
