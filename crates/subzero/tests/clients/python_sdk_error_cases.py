"""An outside MCP client: the official Python SDK drives `subzero mcp` over stdio through
error_cases.json and reads the error code of every failing call.

Usage: python_sdk_error_cases.py
Environment: SUBZERO_EXE, SUBZERO_WORKSPACE, SUBZERO_STATE_DIR, SUBZERO_CONFIG,
SUBZERO_MODEL_URL, SUBZERO_TEST_KEY.
Prints one JSON report on the last line of stdout; exits 1 when an outcome differs from the
case file or a call raises. The SDK validates every successful result's structured content
against the tool's advertised outputSchema.
"""

import asyncio
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def substitute(value, bindings):
    """Replace "$name" strings by their binding, recursively."""
    if isinstance(value, str) and value.startswith("$"):
        return bindings[value[1:]]
    if isinstance(value, list):
        return [substitute(v, bindings) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, bindings) for k, v in value.items()}
    return value


def error_code(result):
    """The error code of a tool error: its text block is the error body as compact JSON."""
    for block in result.content:
        if getattr(block, "type", None) == "text":
            try:
                return json.loads(block.text).get("code")
            except ValueError:
                return None
    return None


async def main() -> int:
    env = os.environ
    cases = json.loads((Path(__file__).parent / "error_cases.json").read_text())
    bindings = {"modelUrl": env["SUBZERO_MODEL_URL"], "oversizePrompt": "é" * (33 * 1024)}
    params = StdioServerParameters(
        command=env["SUBZERO_EXE"],
        args=[
            "mcp",
            "--workspace", env["SUBZERO_WORKSPACE"],
            "--state-dir", env["SUBZERO_STATE_DIR"],
            "--config", env["SUBZERO_CONFIG"],
        ],
        env={"SUBZERO_TEST_KEY": env["SUBZERO_TEST_KEY"], "PATH": env.get("PATH", "")},
    )
    results = []
    failed = False
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for step in cases["steps"]:
                row = {"tool": step["tool"], "expect": step["expect"]}
                try:
                    result = await session.call_tool(step["tool"], substitute(step["arguments"], bindings))
                    row["isError"] = bool(result.is_error)
                    row["structured"] = result.structured_content is not None
                    row["got"] = error_code(result) if result.is_error else "ok"
                    if not result.is_error:
                        for key, value in (result.structured_content or {}).items():
                            if isinstance(value, str):
                                bindings[key] = value
                except Exception as error:  # noqa: BLE001 - reported, then the run fails
                    row["got"] = None
                    row["thrown"] = repr(error)
                failed = failed or row["got"] != step["expect"]
                results.append(row)
    print(json.dumps({"sdk": "mcp", "version": version("mcp"), "results": results}))
    return 1 if failed else 0


sys.exit(asyncio.run(main()))
