// Paths a tool may use: beneath the workspace root, checked once before the operation (the
// same rule as the Rust worker's reading tools). Writes are confined by the kernel besides
// (Landlock on the Node process), so a race between this check and the open cannot write
// outside the grant.

import { realpath } from "node:fs/promises";
import path from "node:path";

/** `abs` when it lies beneath `root` (the canonical part of it that exists), else throws. */
export async function beneath(root, abs) {
  let probe = path.resolve(abs);
  const tail = [];
  for (;;) {
    try {
      const real = await realpath(probe);
      const full = path.join(real, ...tail.reverse());
      if (full === root || full.startsWith(root + path.sep)) return abs;
      break;
    } catch (err) {
      if (err.code !== "ENOENT" && err.code !== "ENOTDIR") throw err;
      const parent = path.dirname(probe);
      if (parent === probe) break;
      tail.push(path.basename(probe));
      probe = parent;
    }
  }
  throw new Error(`${path.relative(root, abs) || abs} is outside the workspace`);
}
