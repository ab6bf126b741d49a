"""A run described once: `RunSpec` (the data and the attachments of a run, in library names) and the
one translation layer every front end goes through (`rlmx.spec.options`)."""

from rlmx.spec.base import ModelRef, SpecError
from rlmx.spec.run import RunSpec

__all__ = ["ModelRef", "RunSpec", "SpecError"]
