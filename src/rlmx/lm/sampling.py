"""Sampling settings (`temperature`, `top_p`, `reasoning_effort`): a model's own, kept by its provider's
LM and put into every request body.

A provider that refuses one answers HTTP 400, which is not retried: `refusal_classifier` turns it into one
error that says which setting the provider refused (or, when its error does not name one, which ones were
sent) and how to stop sending it. What a provider is known not to take is data on its record
(`rlmx.lm.providers.ProviderRecord`): `settings={"rejects": ("top_p",)}` (or `top_p` among its quirks'
`rejected_params`) makes a model of that provider that is given `top_p` fail when it is built
(`check_accepted`), before any request.

Light on purpose (only `rlmx.errors` at import): the command line declares its options from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from rlmx.errors import ConfigError, InvalidSettings

if TYPE_CHECKING:
    from rlmx.lm.retry import Classifier, Failure

# every value a provider takes for reasoning_effort (OpenAI: none to xhigh; Anthropic's effort: low to
# max); which of them a model accepts is the provider's call, refused with a 400
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
SAMPLING_KEYS = ("temperature", "top_p", "reasoning_effort")  # request-body names, in this order


def check_temperature(value: float | None, where: str = "temperature") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2:
        raise InvalidSettings(f"{where} must be a number from 0 to 2, got {value!r}")
    return float(value)


def check_top_p(value: float | None, where: str = "top_p") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidSettings(f"{where} must be a number from 0 to 1, got {value!r}")
    return float(value)


def check_reasoning_effort(value: str | None, where: str = "reasoning_effort") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in REASONING_EFFORTS:
        raise InvalidSettings(f"{where} must be one of {', '.join(REASONING_EFFORTS)}, got {value!r}")
    return value.strip().lower()


@dataclass(frozen=True)
class Sampling:
    """How a model samples its replies; None: not sent (the provider's default)."""

    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        object.__setattr__(self, "top_p", check_top_p(self.top_p))
        object.__setattr__(self, "reasoning_effort", check_reasoning_effort(self.reasoning_effort))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "") -> Sampling:
        """From a config table's keys (others are ignored); a bad value names `where`."""
        try:
            return cls(**{key: values[key] for key in SAMPLING_KEYS if key in values})
        except InvalidSettings as exc:
            raise InvalidSettings(f"{where}: {exc}" if where else str(exc)) from exc

    def __bool__(self) -> bool:
        return any(getattr(self, key) is not None for key in SAMPLING_KEYS)

    def body(self) -> dict[str, Any]:
        """The settings that are set, by their request-body names."""
        return {key: getattr(self, key) for key in SAMPLING_KEYS if getattr(self, key) is not None}

    def over(self, base: Sampling) -> Sampling:
        """These settings, with each one left unset taken from `base`."""
        return Sampling(
            **{
                key: getattr(self, key) if getattr(self, key) is not None else getattr(base, key)
                for key in SAMPLING_KEYS
            }
        )


def sampling_of(lm: object) -> Sampling:
    """The sampling settings a model object keeps (the built-in providers' LMs, and a `CachedLM` around
    one, have a `sampling` attribute); none for any other model."""
    sampling = getattr(lm, "sampling", None)
    return sampling if isinstance(sampling, Sampling) else Sampling()


class ProviderRecordLike(Protocol):
    """What is read here of a provider's record (`rlmx.lm.providers.ProviderRecord`, which imports this
    module's neighbours: naming its shape keeps `providers` -> `options` -> `sampling` one-way)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> Mapping[str, Any]: ...


def rejected_by(record: ProviderRecordLike | None) -> frozenset[str]:
    """The request-body fields a provider's record says it refuses: `settings["rejects"]`, and the
    record's `quirks.rejected_params` where records have quirks."""
    if record is None:
        return frozenset()
    quirks = getattr(record, "quirks", None)
    return frozenset(record.settings.get("rejects", ())) | frozenset(getattr(quirks, "rejected_params", ()))


def check_accepted(sampling: Sampling, record: ProviderRecordLike | None, model: str) -> None:
    """Refuse, before any request, a sampling setting the provider's record says it rejects
    (`record.settings["rejects"]`, a tuple of request-body names)."""
    refused = [key for key in sampling.body() if key in rejected_by(record)]
    if record is not None and refused:
        raise ConfigError(
            f"{record.name}:{model}: the {record.name} provider does not take "
            f"{', '.join(refused)}; {drop_hint(refused)}"
        )


def drop_hint(keys: list[str]) -> str:
    """How to stop sending `keys`: the root's and the sub-model's setting of each (the command line
    shows them as its flags)."""
    names = " / ".join(f"`{name}`" for key in keys for name in (key, f"sub_{key}"))
    return f"remove {names} (from the options, the config file or ModelOptions)"


# other names a provider's error may give a setting: Anthropic's is output_config.effort
ALIASES = {"reasoning_effort": ("effort",)}


def refused_settings(message: str, sent: Mapping[str, Any]) -> list[str]:
    """The sent settings a provider's error message names (`top_p`, `top-p`, `topP`, `reasoning.effort`,
    `output_config.effort`)."""
    text = message.lower()
    named = []
    for key in sent:
        spellings = {key, *(key.replace("_", sep) for sep in ("-", ".", " ", "")), *ALIASES.get(key, ())}
        if any(re.search(rf"(?<![a-z_]){re.escape(s)}(?![a-z_])", text) for s in spellings):
            named.append(key)
    return named


def refusal_failure(failure: Failure, sent: Mapping[str, Any]) -> Failure:
    """A 400 from a request that carried sampling settings, said as a refused setting."""
    if failure.status != 400 or not sent:
        return failure
    named = refused_settings(failure.message, sent)
    keys = named or list(sent)
    shown = ", ".join(f"{key}={sent[key]}" for key in keys)
    said = failure.message.removeprefix("HTTP 400: ")
    if named:
        text = f"HTTP 400: the provider refused {shown} for this model ({said}); {drop_hint(keys)}"
    else:
        text = (
            f"HTTP 400: {said}; the request carried the sampling settings {shown}: if the model does not "
            f"take them, {drop_hint(keys)}"
        )
    return replace(failure, message=text)


def refusal_classifier(classify: Classifier, sent: Mapping[str, Any]) -> Classifier:
    """`classify`, with a 400 said as a refused sampling setting when `sent` is not empty."""
    if not sent:
        return classify

    def classified(exc: Exception) -> Failure | None:
        failure = classify(exc)
        return None if failure is None else refusal_failure(failure, sent)

    return classified
