"""rlmx from the official MCP Python client, over stdio (see README: "Use it from an MCP client")."""

import asyncio
import os

from mcp import Client
from mcp.client.stdio import StdioServerParameters

# the stdio client does not pass your environment on by default: give the server its API key and settings
server = StdioServerParameters(command="rlmx", args=["mcp", "--root", "."], env=dict(os.environ))


async def show_progress(done: float, total: float | None, message: str | None) -> None:
    print("...", message)


async def main() -> None:
    async with Client(server) as client:
        result = await client.call_tool(
            "ask",
            {"question": "Which service logs the most timeouts?", "paths": ["logs"]},
            progress_callback=show_progress,
        )
        print(result.content[0].text)  # the answer, a usage line and the trace path


asyncio.run(main())
