"""An MCP client made with the ``mcp`` package's 1.x client library (the one FastMCP 3 and jupyter-ai 3 use), run in
an overlay that holds that release: it connects to Betty over streamable HTTP (``--url``, the credential in
``$BETTY_MCP_TOKEN`` as a bearer header) or over stdio (``--stdio``: it spawns ``betty mcp`` itself), lists the tools,
makes the calls given as JSON, and prints what it heard as one JSON object: ``{tools: [...], calls: [{text, error}
| {protocol_error}]}``. Run by tests/test_mcp_versions.py; never imported by the suite."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import httpx
import mcp
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import Implementation


async def session_calls(session: ClientSession, calls: list[list[Any]]) -> dict[str, Any]:
    await session.initialize()
    tools = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in (await session.list_tools()).tools]
    heard: list[dict[str, Any]] = []
    for name, arguments in calls:
        try:
            result = await session.call_tool(name, arguments)
        except McpError as error:
            heard.append({"protocol_error": error.error.message})
            continue
        heard.append({"text": "\n".join(getattr(block, "text", "") for block in result.content),
                      "error": bool(result.isError)})
    return {"mcp": mcp.__file__, "tools": tools, "calls": heard}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    calls = json.loads(args.calls)
    info = Implementation(name="betty-v1-client", version="1.0")
    token = os.environ["BETTY_MCP_TOKEN"]
    if args.stdio:
        command = StdioServerParameters(command=sys.executable, args=["-m", "betty_jupyter.cli", "mcp", *args.betty],
                                        env=dict(os.environ))
        async with stdio_client(command) as (read, write), ClientSession(read, write, client_info=info) as session:
            return await session_calls(session, calls)
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(60, read=300))
    async with http, streamable_http_client(args.url, http_client=http) as (read, write, _), \
            ClientSession(read, write, client_info=info) as session:
        return await session_calls(session, calls)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--calls", default="[]")
    parser.add_argument("betty", nargs="*", help="arguments of betty mcp (after --)")
    print(json.dumps(anyio.run(main, parser.parse_args())))
