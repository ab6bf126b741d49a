"""rlmx as DSPy's code interpreter: `dspy.RLM(signature, interpreter_factory=Interpreter)`.

Model code runs in native CPython in rlmx's isolated worker (namespaces, or Landlock + seccomp); DSPy's
tools run on the host across the worker's bridge. See docs/integrations/dspy.md.
"""

from rlmx.integrations.dspy.interpreter import Interpreter, interpreter_factory
from rlmx.integrations.dspy.runtime import close_runtime

__all__ = ["Interpreter", "close_runtime", "interpreter_factory"]
