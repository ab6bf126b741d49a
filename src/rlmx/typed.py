"""Typed answers: the final answer must match a pydantic type or a JSON schema.

    class Count(BaseModel):
        label: str
        count: int

    result = RLM("openai:gpt-5-mini").run("How many ...?", text, output=Count)
    result.parsed  # a Count instance; result.answer holds its JSON form

The root model is told the schema (prompts/output_schema.md). Every FINAL / FINAL_VAR value of the root
is checked; a value that does not match goes back to the model with the errors, at most `max_retries`
times, and then the run ends with `stopped_by="error"`, an error naming the problem, and the last raw
answer kept in `RunResult.answer`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from typing import Any

from rlmx.answer import Answer
from rlmx.errors import ConfigError

MAX_ERRORS_SHOWN = 6
FENCED_JSON = re.compile(r"^\s*```[A-Za-z]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


class OutputSpec:
    """What the final answer must look like: a pydantic type (BaseModel, list[...], ...) or a JSON schema."""

    def __init__(self, target: Any, *, max_retries: int = 2, name: str | None = None) -> None:
        if max_retries < 0:
            raise ConfigError("output: max_retries must be >= 0")
        self.max_retries = max_retries
        self._adapter: Any = None
        self._validator: Any = None
        if isinstance(target, dict):
            self.schema = target
            self._validator = _schema_validator(target)
            self.name = name or str(target.get("title") or "answer")
        else:
            from pydantic import PydanticSchemaGenerationError, TypeAdapter

            try:
                self._adapter = TypeAdapter(target)
                self.schema = self._adapter.json_schema()
            except (PydanticSchemaGenerationError, TypeError) as exc:
                raise ConfigError(
                    f"output: {target!r} is neither a JSON schema dict nor a type pydantic can validate: {exc}"
                ) from exc
            self.name = name or str(getattr(target, "__name__", "answer"))

    @property
    def from_schema(self) -> bool:
        """Made from a JSON schema (data), not from a Python type."""
        return self._adapter is None

    @classmethod
    def of(cls, output: Any) -> OutputSpec | None:
        """`None`, an OutputSpec, a JSON schema dict, or a type -> an OutputSpec (or None)."""
        if output is None or isinstance(output, OutputSpec):
            return output
        return cls(output)

    def schema_text(self) -> str:
        return json.dumps(self.schema, indent=2, ensure_ascii=False)

    def prompt(self) -> str:
        """The section appended to the root's system prompt (prompts/output_schema.md)."""
        from rlmx.prompts import fill, load

        return fill(load("output_schema.md"), schema=self.schema_text(), retries=self.max_retries)

    def feedback(self, checked: Answer, corrections_left: int) -> str:
        """What the model is told when its answer was rejected (prompts/output_rejected.md)."""
        from rlmx.prompts import fill, load

        return fill(load("output_rejected.md"), errors=checked.problems, left=corrections_left).strip()

    def failure(self, checked: Answer, attempts: int) -> str:
        """The run's one-line error once the corrections are used up."""
        raw_text = checked.text()
        shown = raw_text if len(raw_text) <= 300 else raw_text[:300] + "..."
        problems = "; ".join(line.removeprefix("- ") for line in (checked.problems or "").splitlines())
        return (
            f"the final answer did not match the output schema {self.name!r} after {attempts} attempt(s): "
            f"{problems}; last raw answer: {shown}"
        )

    def check(self, answer: Answer) -> Answer:
        """The answer with its value decoded and validated: `parsed` set when it matches the schema
        (`value` then holds its JSON form), `problems` saying what is wrong when it does not."""
        value, decode_error = self._decode(answer.value)
        if decode_error is not None:
            return replace(answer, problems=decode_error)
        if self._adapter is not None:
            from pydantic import ValidationError

            try:
                parsed = self._adapter.validate_python(value)
            except ValidationError as exc:
                return replace(answer, problems=_pydantic_errors(exc))
            return replace(answer, value=self._adapter.dump_python(parsed, mode="json"), parsed=parsed)
        problems = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if problems:
            return replace(answer, problems=_schema_errors(problems))
        return replace(answer, value=value, parsed=value)

    def _decode(self, answer: Any) -> tuple[Any, str | None]:
        if not isinstance(answer, str):
            return answer, None
        text = answer.strip()
        fenced = FENCED_JSON.match(text)
        if fenced:
            text = fenced.group(1).strip()
        try:
            return json.loads(text), None
        except json.JSONDecodeError as exc:
            json_error = f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        try:  # FINAL(some_dict) called in code arrives as the dict's Python repr
            return ast.literal_eval(text), None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
        if self.schema.get("type") == "string":
            return answer, None
        return None, json_error


def _schema_validator(schema: dict[str, Any]) -> Any:
    try:
        from jsonschema import SchemaError, validators
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "a JSON-schema output needs the jsonschema package: pip install 'rlmx[typed]' "
            "(or pass a pydantic model instead)"
        ) from exc
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ConfigError(f"output schema is not a valid JSON schema at {where}: {exc.message}") from exc
    return cls(schema)


def _where(path: list[Any] | tuple[Any, ...]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _schema_errors(problems: list[Any]) -> str:
    lines = [f"- at {_where(list(p.absolute_path))}: {p.message}" for p in problems[:MAX_ERRORS_SHOWN]]
    if len(problems) > MAX_ERRORS_SHOWN:
        lines.append(f"- ... and {len(problems) - MAX_ERRORS_SHOWN} more")
    return "\n".join(lines)


def _pydantic_errors(exc: Any) -> str:
    errors = exc.errors(include_url=False)
    lines = [f"- at {_where(tuple(e['loc']))}: {e['msg']}" for e in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"- ... and {len(errors) - MAX_ERRORS_SHOWN} more")
    return "\n".join(lines)


def load_schema_file(path: str) -> dict[str, Any]:
    """Read a JSON schema from a file (for `rlmx ask --output-schema FILE`)."""
    try:
        with open(path, encoding="utf-8") as handle:
            schema = json.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read output schema {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"output schema {path} is not JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(schema, dict):
        raise ConfigError(f"output schema {path} must be a JSON object (a JSON schema)")
    return schema
