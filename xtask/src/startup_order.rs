//! `cargo xtask startup-order`: write `crates/subzero/startup.order`, the functions a
//! `subzero mcp` runs from exec to its `initialize` reply, in the order they first run.
//!
//! The linker (`crates/subzero/build.rs`) lays those functions out first and together. A
//! host waits for that reply, and each 64 KiB of code the start touches costs a page fault
//! (the kernel maps code around a fault 64 KiB at a time): spread over the 13 MiB of code,
//! the start took ~120 such faults; packed, it takes ~20.
//!
//! How: build the release `subzero` as it ships, with the linker's map of it (the
//! profile is part of every symbol's name, so only this very build names them right);
//! start it as the bench does (a configuration with a credential, an existing state
//! directory, an `initialize` line waiting on stdin) under `ptrace`; single-step its main
//! thread until the reply reaches stdout; name the function of every new instruction
//! address from the map; then link the shipped binary again, in the new order. Linux
//! x86-64 only.
//!
//! The file names symbols, which carry their crate's hash: a toolchain or dependency
//! change leaves some lines naming nothing, which the linker skips. Run this again then;
//! `cargo xtask bench` fails when the cold start misses its goal.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::ptrace;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::link_map;

/// Where the order is written, relative to the workspace root.
pub const ORDER_FILE: &str = "crates/subzero/startup.order";

/// The line a host sends first; the trace ends when the answer to it starts.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"startup-order","version":"0"}}}"#;

pub fn startup_order(root: &Path) -> Result<(), Vec<String>> {
    let release = crate::bench::target_dir(root).join("release");
    let (exe, map) = (release.join("subzero"), release.join("subzero.map"));
    release_build(root, Some(&map))?;
    let scene = Scene::new().map_err(|e| vec![format!("cannot prepare a state directory: {e}")])?;
    scene.warm_up(&exe).map_err(|e| vec![e])?;
    eprintln!(
        "tracing {} to its initialize reply (about a minute)…",
        exe.display()
    );
    let trace = trace_to_reply(scene.command(&exe)).map_err(|e| vec![e])?;
    let map = std::fs::read_to_string(&map)
        .map_err(|e| vec![format!("cannot read the link map {}: {e}", map.display())])?;
    let functions = link_map::functions(&map);
    let order = first_run_order(&functions, &trace.addresses);
    let bytes: u64 = order.iter().map(|f| f.size).sum();
    let mut text = String::from(
        "# The functions `subzero mcp` runs from exec to its `initialize` reply, in the order\n\
         # they first run; the linker places them first (crates/subzero/build.rs).\n\
         # Written by `cargo xtask startup-order`; do not edit.\n",
    );
    for function in &order {
        text.push_str(&function.symbol);
        text.push('\n');
    }
    std::fs::write(root.join(ORDER_FILE), text)
        .map_err(|e| vec![format!("cannot write {ORDER_FILE}: {e}")])?;
    eprintln!(
        "{} instructions stepped; {} functions, {} KiB of code, written to {ORDER_FILE}",
        trace.steps,
        order.len(),
        bytes / 1024
    );
    // The binary just traced was linked in the previous order: link it in this one.
    release_build(root, None)
}

/// The functions holding `addresses`, each once, in the order of its first address.
pub fn first_run_order<'f>(
    functions: &'f [link_map::Function],
    addresses: &[u64],
) -> Vec<&'f link_map::Function> {
    let mut seen = std::collections::HashSet::new();
    addresses
        .iter()
        .filter_map(|a| link_map::function_at(functions, *a))
        .filter(|f| seen.insert(f.start))
        .collect()
}

/// `cargo build --release -p subzero`, the shipped build; with `map`, `build.rs` also asks
/// the linker for its map of the binary (`SUBZERO_LINK_MAP`).
fn release_build(root: &Path, map: Option<&Path>) -> Result<(), Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["build", "--release", "-p", "subzero"]);
    if let Some(map) = map {
        command.env("SUBZERO_LINK_MAP", map);
    }
    crate::bench::run(&mut command, "cargo build --release -p subzero")
}

/// A workspace, a state directory and a configuration naming one credential, as the bench
/// starts the broker with.
struct Scene {
    dir: PathBuf,
}

const KEY_VAR: &str = "SUBZERO_STARTUP_ORDER_KEY";

impl Scene {
    fn new() -> std::io::Result<Scene> {
        let dir =
            std::env::temp_dir().join(format!("subzero-startup-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("workspace"))?;
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "[credentials.local]\nenv = \"{KEY_VAR}\"\norigins = [\"http://127.0.0.1:9\"]\n"
            ),
        )?;
        Ok(Scene { dir })
    }

    fn command(&self, exe: &Path) -> Command {
        let mut command = Command::new(exe);
        command
            .arg("mcp")
            .arg("--workspace")
            .arg(self.dir.join("workspace"))
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .arg("--config")
            .arg(self.dir.join("config.toml"))
            .env(KEY_VAR, "startup-order-key")
            .env_remove("SUBZERO_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    }

    /// One whole start (initialize, initialized, EOF) creates and migrates the database, so
    /// the traced start finds an existing one, as a host's restart does.
    fn warm_up(&self, exe: &Path) -> Result<(), String> {
        let mut child = self
            .command(exe)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        writeln!(stdin, "{INITIALIZE}").map_err(|e| e.to_string())?;
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .map_err(|e| e.to_string())?;
        drop(stdin);
        let mut out = String::new();
        child
            .stdout
            .take()
            .ok_or("no stdout")?
            .read_to_string(&mut out)
            .map_err(|e| e.to_string())?;
        let status = child.wait().map_err(|e| e.to_string())?;
        if !out.contains(r#""id":1"#) || !status.success() {
            return Err(format!(
                "the warm-up start did not answer initialize ({status}): {out}"
            ));
        }
        Ok(())
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Trace {
    /// Each address of the binary's code the main thread executed, once, in order
    /// (relative to the binary's load address, as its symbol table counts).
    addresses: Vec<u64>,
    steps: u64,
}

/// Start `command` stopped at its exec, single-step its main thread until its stdout has a
/// byte, kill it. Threads it starts run untraced.
fn trace_to_reply(mut command: Command) -> Result<Trace, String> {
    // SAFETY: between fork and exec the child only calls ptrace(PTRACE_TRACEME), a single
    // async-signal-safe system call.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| ptrace::traceme().map_err(std::io::Error::from));
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start the broker: {e}"))?;
    let pid = Pid::from_raw(i32::try_from(child.id()).map_err(|e| e.to_string())?);
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let outcome = step_until_output(pid, &mut stdin, &stdout);
    let _ = kill(pid, Signal::SIGKILL);
    let _ = waitpid(pid, Some(WaitPidFlag::__WALL));
    outcome
}

fn step_until_output(
    pid: Pid,
    stdin: &mut std::process::ChildStdin,
    stdout: &std::process::ChildStdout,
) -> Result<Trace, String> {
    let wait = |pid| waitpid(pid, Some(WaitPidFlag::__WALL)).map_err(|e| format!("waitpid: {e}"));
    if !matches!(wait(pid)?, WaitStatus::Stopped(_, Signal::SIGTRAP)) {
        return Err("the broker did not stop at its exec".to_string());
    }
    let (base, code) = code_range(pid)?;
    writeln!(stdin, "{INITIALIZE}").map_err(|e| format!("cannot write initialize: {e}"))?;
    fcntl(stdout, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(|e| format!("fcntl: {e}"))?;
    let mut seen = vec![false; usize::try_from(code.end - code.start).map_err(|e| e.to_string())?];
    let mut trace = Trace {
        addresses: Vec::new(),
        steps: 0,
    };
    let mut signal = None;
    loop {
        ptrace::step(pid, signal.take()).map_err(|e| format!("ptrace(SINGLESTEP): {e}"))?;
        match wait(pid)? {
            WaitStatus::Stopped(_, Signal::SIGTRAP) => {}
            // A signal of its own, not our step's trap: deliver it with the next step.
            WaitStatus::Stopped(_, other) => {
                signal = Some(other);
                continue;
            }
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {
                return Err("the broker ended before it answered initialize".to_string());
            }
            _ => continue,
        }
        let rip = ptrace::getregs(pid)
            .map_err(|e| format!("ptrace(GETREGS): {e}"))?
            .rip;
        trace.steps += 1;
        if code.contains(&rip) {
            let slot = &mut seen[(rip - code.start) as usize];
            if !*slot {
                *slot = true;
                trace.addresses.push(rip - base);
            }
        }
        if trace.steps.is_multiple_of(1024)
            && matches!(nix::unistd::read(stdout, &mut [0u8; 1]), Ok(n) if n > 0)
        {
            return Ok(trace);
        }
    }
}

/// The executable's load address and its code mapping, from `/proc/<pid>/maps`.
fn code_range(pid: Pid) -> Result<(u64, std::ops::Range<u64>), String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| e.to_string())?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| e.to_string())?;
    let mut base = None;
    let mut code = None;
    for line in maps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || Path::new(fields[5]) != exe {
            continue;
        }
        let (start, end) = fields[0].split_once('-').ok_or("bad maps line")?;
        let start = u64::from_str_radix(start, 16).map_err(|e| e.to_string())?;
        let end = u64::from_str_radix(end, 16).map_err(|e| e.to_string())?;
        if u64::from_str_radix(fields[2], 16) == Ok(0) && base.is_none() {
            base = Some(start);
        }
        if fields[1].contains('x') {
            code = Some(start..end);
        }
    }
    match (base, code) {
        (Some(base), Some(code)) => Ok((base, code)),
        _ => Err(format!(
            "no code mapping of {} in the broker's maps",
            exe.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn f(start: u64, size: u64, symbol: &str) -> link_map::Function {
        link_map::Function {
            start,
            size,
            symbol: symbol.into(),
        }
    }

    #[test]
    fn functions_come_once_in_the_order_they_first_ran() {
        let all = vec![
            f(0x100, 0x10, "a"),
            f(0x200, 0x10, "b"),
            f(0x300, 0x10, "c"),
        ];
        let order = first_run_order(&all, &[0x304, 0x105, 0x306, 0x50, 0x100, 0x208]);
        let names: Vec<&str> = order.iter().map(|f| f.symbol.as_str()).collect();
        assert_eq!(names, ["c", "a", "b"]);
    }

    /// `.cargo/rustc-wrapper`, run with a stand-in for rustc that prints the arguments it
    /// was given (and reports `host` as the host triple): those arguments.
    fn wrapped(host: &str, args: &[&str]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let rustc = dir.path().join("rustc");
        std::fs::write(
            &rustc,
            format!(
                "#!/usr/bin/env bash\nif [ \"$1\" = -vV ]; then echo 'host: {host}'; exit 0; fi\nprintf '%s\\n' \"$@\"\nprintenv CARGO_BIN_EXE_subzero-worker\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&rustc, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let wrapper = crate::workspace_root().join(".cargo/rustc-wrapper");
        // Cargo names a package's binaries to its tests in variables no shell variable can
        // be named like (`CARGO_BIN_EXE_subzero-worker`); the wrapper must pass them on.
        let out = Command::new(wrapper)
            .arg(&rustc)
            .args(args)
            .env("CARGO_BIN_EXE_subzero-worker", "/bin/worker")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut lines: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.pop().as_deref(), Some("/bin/worker"), "{lines:?}");
        lines
    }

    #[test]
    fn the_wrapper_links_only_the_broker_binary_statically() {
        const X86: &str = "x86_64-unknown-linux-gnu";
        let broker = [
            "--crate-name",
            "subzero",
            "--edition=2024",
            "src/main.rs",
            "--crate-type",
            "bin",
        ];
        let mut expected: Vec<String> = broker.iter().map(|a| (*a).to_owned()).collect();
        expected.extend(["-C".to_owned(), "target-feature=+crt-static".to_owned()]);
        assert_eq!(wrapped(X86, &broker), expected);
        let named = [&broker[..], &["--target", X86]].concat();
        assert_eq!(
            wrapped("aarch64-unknown-linux-gnu", &named).last().unwrap(),
            "target-feature=+crt-static"
        );
        // Everything else goes to rustc exactly as cargo wrote it.
        for args in [
            &[
                "--crate-name",
                "subzero",
                "--crate-type",
                "lib",
                "src/lib.rs",
            ][..],
            &["--crate-name", "subzero", "src/main.rs", "--test"],
            &["--crate-name", "subzero_worker", "--crate-type", "bin"],
            &[
                "--crate-name",
                "subzero",
                "--crate-type",
                "bin",
                "--target",
                "aarch64-unknown-linux-gnu",
            ],
            &[
                "--crate-name",
                "subzero",
                "--crate-type",
                "bin",
                "--cfg",
                "feature=\"a b\"",
            ],
        ] {
            let host = if args.contains(&"--cfg") {
                "aarch64-unknown-linux-gnu"
            } else {
                X86
            };
            assert_eq!(wrapped(host, args), args, "{args:?}");
        }
    }
}
