"""An outside MCP client: the official Python SDK drives `subzero mcp` over stdio.

Usage: python_sdk_client.py SUBZERO WORKSPACE STATE_DIR CONFIG MODEL_URL
Prints one JSON object with what it observed; exits non-zero on any failure. The SDK
validates structured content against each tool's advertised outputSchema, so a result
that breaks the contract fails here.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main() -> None:
    exe, workspace, state_dir, config, model_url = sys.argv[1:6]
    params = StdioServerParameters(
        command=exe,
        args=["mcp", "--workspace", workspace, "--state-dir", state_dir, "--config", config],
        env={"SUBZERO_TEST_KEY": os.environ["SUBZERO_TEST_KEY"], "PATH": os.environ.get("PATH", "")},
    )
    report = {}
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["protocolVersion"] = str(init.protocol_version)
            report["server"] = init.server_info.name
            tools = await session.list_tools()
            report["tools"] = sorted(t.name for t in tools.tools)

            spawned = await session.call_tool(
                "subzero_spawn",
                {
                    "prompt": "Read README.md",
                    "templateId": "researcher",
                    "model": {"url": model_url, "model": "scripted", "credentialRef": "test"},
                },
            )
            assert not spawned.is_error, spawned.content
            child = spawned.structured_content["childId"]
            snapshot = None
            for _ in range(5):
                got = await session.call_tool(
                    "subzero_get",
                    {"childId": child, "waitMs": 20000},
                    progress_callback=on_progress,
                )
                assert not got.is_error, got.content
                snapshot = got.structured_content
                if snapshot["state"] != "running":
                    break
            report["state"] = snapshot["state"]
            report["lastRun"] = snapshot["lastRun"]
            report["progress"] = progress

            bad = await session.call_tool("subzero_get", {"childId": "ch_nope"})
            report["badIsError"] = bad.is_error
            # A tool error carries no structured content; its text is the error body as JSON.
            report["badStructured"] = bad.structured_content is not None
            report["badCode"] = json.loads(bad.content[0].text).get("code")
            text = await session.call_tool("subzero_info", {})
            report["infoText"] = json.loads(text.content[0].text)["protocolVersion"]
    print(json.dumps(report))


asyncio.run(main())
