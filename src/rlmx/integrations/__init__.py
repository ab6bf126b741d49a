"""Other frameworks over rlmx's isolated REPL: `rlmx.integrations.dspy` (DSPy's code interpreter)."""
