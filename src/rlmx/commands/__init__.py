"""Sub-commands of `rlmx` beyond `ask`. Each module defines `register(app)` and imports heavy things lazily."""

COMMAND_MODULES = ("view", "serve", "mcp", "eval")
