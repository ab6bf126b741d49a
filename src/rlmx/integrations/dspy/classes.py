"""DSPy's own names, which a CodeInterpreter must raise and return: imported once, with one clear line
when DSPy is missing."""

from __future__ import annotations

from typing import Any

from rlmx.errors import ConfigError


class DSPyMissing(ConfigError, ImportError):
    """rlmx.integrations.dspy was used where DSPy is not installed."""


try:
    from dspy.primitives import code_interpreter as _dspy_ci
    from dspy.utils.callback import with_callbacks as _with_callbacks
except ImportError as exc:  # pragma: no cover - said in one line
    raise DSPyMissing(
        f"rlmx.integrations.dspy needs DSPy (3.3.1 or later) in this environment ({exc}); "
        "install it with: pip install 'rlmx[dspy]'"
    ) from exc

CodeInterpreterError: type[Exception] = _dspy_ci.CodeInterpreterError
# 3.3.1 and later: recoverable errors of the submitted code
CodeExecutionError: type[Exception] = getattr(_dspy_ci, "CodeExecutionError", CodeInterpreterError)
FinalOutput: Any = _dspy_ci.FinalOutput
# DSPy's callbacks (on_interpreter_execute_start, ...) around start, execute, shutdown and invoke_tool
with_callbacks: Any = _with_callbacks
