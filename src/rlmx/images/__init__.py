"""Images: image documents of a context, and sub-calls that show them to a vision model (docs/images.md).

`probe` reads an image's format and pixel size from its first bytes (standard library only: the worker
imports it); the host-side layer (`refs`, `parts`, `vision`, `tokens`) resolves what a cell names, checks
it against the model's capability and caps, and builds each provider's request parts.
"""
