#!/usr/bin/env node
// subzero-mcp: runs the prebuilt `subzero` that this platform's optional dependency carries
// (@subzero-mcp/linux-x64 or @subzero-mcp/linux-arm64, with subzero-worker and subzero-hold
// beside it), with the same arguments and the same stdin, stdout and stderr: to an MCP host,
// `npx -y subzero-mcp mcp --workspace .` is the broker itself, its stdio untouched.
//
// SUBZERO_BINARY=/path/to/subzero runs that binary instead (from `cargo install --locked
// subzero` or a release archive; its two companions must be beside it).
//
// SIGTERM, SIGINT and SIGHUP are passed on to the broker, which stops its children's runs,
// records them and exits; this process then exits with the broker's code, or by the signal
// that ended the broker.
"use strict";

const { spawn } = require("node:child_process");
const os = require("node:os");
const path = require("node:path");

/** The platform packages, by `<process.platform>-<process.arch>`. */
const PACKAGES = {
  "linux-x64": "@subzero-mcp/linux-x64",
  "linux-arm64": "@subzero-mcp/linux-arm64",
};
const FORWARDED = ["SIGTERM", "SIGINT", "SIGHUP"];
const RELEASES = "https://github.com/subzero-mcp/subzero/releases";

/** Says what went wrong and what to do, on stderr, and exits 1. */
function fail(lines) {
  process.stderr.write(`subzero-mcp: ${lines.join("\n  ")}\n`);
  process.exit(1);
}

/** The ways to Subzero that need no platform package. */
const WITHOUT_NPM = [
  `or install Subzero without npm (\`cargo install --locked subzero\`, or a release archive from ${RELEASES})`,
  "and set SUBZERO_BINARY to that `subzero` (keep subzero-worker and subzero-hold beside it).",
];

/** The `subzero` to run: SUBZERO_BINARY, else the one in this platform's package. */
function broker() {
  if (process.env.SUBZERO_BINARY) {
    return process.env.SUBZERO_BINARY;
  }
  const platform = `${process.platform}-${process.arch}`;
  const known = Object.keys(PACKAGES).join(", ");
  const pkg = PACKAGES[platform];
  if (pkg === undefined) {
    fail([
      `there is no prebuilt Subzero for ${platform}; prebuilt platforms: ${known};`,
      ...WITHOUT_NPM,
    ]);
  }
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch {
    fail([
      `${pkg} is not installed: it carries Subzero's binaries for ${platform} (prebuilt platforms: ${known}).`,
      "npm leaves it out when optional dependencies are omitted (--omit=optional, --no-optional):",
      "reinstall subzero-mcp without omitting them,",
      ...WITHOUT_NPM,
    ]);
  }
  return path.join(path.dirname(manifest), "bin", "subzero");
}

function main() {
  const exe = broker();
  const child = spawn(exe, process.argv.slice(2), { stdio: "inherit" });
  const forward = (signal) => () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
    }
  };
  const handlers = FORWARDED.map((signal) => [signal, forward(signal)]);
  for (const [signal, handler] of handlers) {
    process.on(signal, handler);
  }
  child.on("error", (err) => {
    fail([`cannot run ${exe}: ${err.message}`]);
  });
  child.on("exit", (code, signal) => {
    if (signal === null) {
      process.exit(code ?? 1);
    }
    // Ended by a signal: end the same way, so whoever started us sees it.
    for (const [name, handler] of handlers) {
      process.removeListener(name, handler);
    }
    process.kill(process.pid, signal);
    // A signal Node ignores (SIGPIPE) does not end it: exit as a shell reports that signal.
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] ?? 0)), 1000);
  });
}

main();
