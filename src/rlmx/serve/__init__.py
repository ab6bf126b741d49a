"""Serving rlmx to other tools: an OpenAI-compatible HTTP server (`rlmx serve`, extra `serve`) and the
pieces it shares with the MCP server (`rlmx mcp`, extra `mcp`): profiles, confined file roots, progress.

Nothing here imports the web stack at import time; `rlmx.serve.app` does, and needs `rlmx[serve]`.
"""
