"""Where model-written code runs. Kept import-light: the worker imports this package."""
