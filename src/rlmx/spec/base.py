"""What a run spec and its data form share: the data's version, the sealed keys' names, the error."""

from __future__ import annotations

from rlmx.errors import ConfigError
from rlmx.lm.options import ModelRef  # where it lives (the config layer makes them too)

DATA_VERSION = 1
SEALED_KEY_PREFIX = "RLMX_SEALED_KEY_"


class SpecError(ConfigError):
    """A spec cannot be turned into data (an attachment with no reference) or read back from data."""


__all__ = ["DATA_VERSION", "SEALED_KEY_PREFIX", "ModelRef", "SpecError"]
