"""rlmx as an MCP *client*: the user's MCP servers' tools as functions in the model's REPL (see
docs/mcp-servers.md). rlmx's own MCP server is rlmx.mcp_server."""
