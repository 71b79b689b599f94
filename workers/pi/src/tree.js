// The tool tree. Bash commands lead their own process groups; a command may also leave its
// group (setsid, double fork): it is then re-parented to the namespace's init, the `subzero
// worker --engine pi` process that started this Node, which alone can find and end it. The
// init listens on a socket this process inherits (SUBZERO_PI_TREE_FD): `kill` asks it to end
// and reap every process of the namespace but this one, and it answers `reaped N`.

import net from "node:net";
import { log } from "./wire.js";

const groups = new Set();
let socket;
let pending = [];
let buffered = "";

/** Records a tool process group leader. */
export function register(pid) {
  groups.add(pid);
}

/** Kills one process group at once. */
export function killGroup(pid) {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function channel() {
  if (socket !== undefined) return socket;
  const fd = Number.parseInt(process.env.SUBZERO_PI_TREE_FD ?? "", 10);
  if (!Number.isInteger(fd) || fd < 3) {
    socket = null;
    return socket;
  }
  socket = new net.Socket({ fd, readable: true, writable: true });
  socket.unref();
  socket.on("data", (chunk) => {
    buffered += chunk.toString("utf8");
    let nl = buffered.indexOf("\n");
    while (nl !== -1) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const reaped = Number.parseInt(line.replace(/^reaped /, ""), 10);
      pending.shift()?.(Number.isInteger(reaped) ? reaped : 0);
      nl = buffered.indexOf("\n");
    }
  });
  socket.on("error", (err) => {
    log("warn", "the tree channel to the init failed", { err: err.message });
    for (const resolve of pending) resolve(0);
    pending = [];
  });
  return socket;
}

/**
 * Ends every tool process (the groups this worker started, and, through the init, everything
 * else in the namespace but this process) and resolves with how many were found, once none is
 * left.
 */
export async function killAll() {
  const mine = [...groups];
  groups.clear();
  for (const pid of mine) killGroup(pid);
  const init = channel();
  if (!init) return mine.length;
  return await new Promise((resolve) => {
    pending.push(resolve);
    init.write("kill\n");
  });
}
