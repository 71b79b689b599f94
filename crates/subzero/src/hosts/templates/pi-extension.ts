// Subzero for Pi 1.x: registers the `subzero mcp` stdio server through Pi's extension API.
//
// Printed by `subzero hosts print pi --extension`. This file is OPTIONAL: the mcp.json entry that
// `subzero hosts install pi` writes does the same job. Use it when you prefer an extension, e.g.
// to ship the server with a Pi package. Save it as ~/.pi/agent/extensions/subzero.ts (every
// project) or .pi/extensions/subzero.ts (this project, once trusted), then restart Pi or /reload.
// A server of the same name in mcp.json takes precedence over this registration.
//
// Needs Pi 1.x (npm package @earendil-works/pi-coding-agent). Pi 0.x
// (@mariozechner/pi-coding-agent) has no MCP support and exits on `pi.registerMcpServer`.
// `exposure: "direct"` declares the tools to the model; Pi's default, "codemode", does not.

export default function subzero(pi: {
  registerMcpServer(
    name: string,
    config: { command: string; args: string[]; exposure: string; description: string },
  ): void;
}): void {
  pi.registerMcpServer("subzero", {
    command: __SUBZERO_COMMAND__,
    args: __SUBZERO_ARGS__,
    exposure: __SUBZERO_EXPOSURE__,
    description: __SUBZERO_DESCRIPTION__,
  });
}
