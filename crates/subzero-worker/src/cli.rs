//! The worker's command line, parsed by hand: `worker …` (a child's worker, or with
//! `--engine pi` the Pi worker's init) and `tool-exec …` (one Pi bash command in a nested
//! Landlock domain). The broker writes these arguments, never a user, so there is no help
//! text to offer and no CLI framework to load: the `subzero-worker` binary starts with
//! nothing but this.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::{PiOptions, ToolExecOptions, WorkerOptions};

/// `subzero-worker <worker|tool-exec> ARGS…`: the exit code.
pub fn main(mut args: impl Iterator<Item = OsString>) -> i32 {
    match args.next().as_deref().map(OsStr::as_bytes) {
        Some(b"worker") => worker(args.collect()),
        Some(b"tool-exec") => tool_exec(args.collect()),
        Some(b"--version") => {
            println!("subzero-worker {}", env!("CARGO_PKG_VERSION"));
            0
        }
        _ => {
            eprintln!(
                "subzero-worker: started by `subzero mcp` as `subzero-worker worker …`; it is not run by hand"
            );
            2
        }
    }
}

/// `worker ARGS…`: runs the worker (or the Pi worker's init) until its control channel
/// closes; the exit code.
pub fn worker(args: Vec<OsString>) -> i32 {
    match parse_worker(args) {
        Ok((options, Some(pi))) => crate::run_pi(options, pi),
        Ok((options, None)) => crate::run(options),
        Err(why) => {
            eprintln!("subzero-worker worker: {why}");
            2
        }
    }
}

/// `tool-exec ARGS… [--] COMMAND…`: execs the command confined; returns only on failure.
pub fn tool_exec(args: Vec<OsString>) -> i32 {
    match parse_tool_exec(args) {
        Ok(options) => crate::tool_exec(options),
        Err(why) => {
            eprintln!("subzero-worker tool-exec: {why}");
            126
        }
    }
}

/// The flags, as `--name value` or `--name=value`.
struct Flags {
    args: std::vec::IntoIter<OsString>,
}

impl Flags {
    fn new(args: Vec<OsString>) -> Flags {
        Flags {
            args: args.into_iter(),
        }
    }

    /// The next flag's name and value; `Ok(None)` at the end or at the first word that is
    /// not a flag (returned as the name's `Err`-free rest, see [`Flags::rest`]).
    fn next(&mut self) -> Result<Option<(String, OsString)>, String> {
        let Some(arg) = self.args.as_slice().first().cloned() else {
            return Ok(None);
        };
        let Some(flag) = arg.to_str().and_then(|a| a.strip_prefix("--")) else {
            return Ok(None);
        };
        if flag.is_empty() {
            return Ok(None);
        }
        self.args.next();
        if let Some((name, value)) = flag.split_once('=') {
            return Ok(Some((name.to_owned(), OsString::from(value))));
        }
        let value = self
            .args
            .next()
            .ok_or_else(|| format!("--{flag} needs a value"))?;
        Ok(Some((flag.to_owned(), value)))
    }

    /// What is left after the flags (a leading `--` dropped).
    fn rest(self) -> Vec<OsString> {
        let mut rest: Vec<OsString> = self.args.collect();
        if rest.first().is_some_and(|a| a == "--") {
            rest.remove(0);
        }
        rest
    }
}

fn text(name: &str, value: OsString) -> Result<String, String> {
    value
        .into_string()
        .map_err(|_| format!("--{name} is not UTF-8"))
}

fn parse_worker(args: Vec<OsString>) -> Result<(WorkerOptions, Option<PiOptions>), String> {
    let mut options = WorkerOptions::default();
    let mut pi = PiOptions::default();
    let mut engine = None;
    let mut flags = Flags::new(args);
    while let Some((name, value)) = flags.next()? {
        match name.as_str() {
            "lock-fd" => options.lock_fds.push(
                text(&name, value)?
                    .parse()
                    .map_err(|_| "--lock-fd takes a descriptor number".to_owned())?,
            ),
            "scratch-parent" => options.scratch_parent = Some(PathBuf::from(value)),
            "process-containment-reason" => {
                options.process_containment_reason = Some(text(&name, value)?);
            }
            "landlock" => match text(&name, value)?.as_str() {
                "auto" => options.landlock_off = false,
                "off" => options.landlock_off = true,
                other => return Err(format!("--landlock takes auto or off, not {other:?}")),
            },
            "network" => match text(&name, value)?.as_str() {
                "auto" => options.network_off = false,
                "off" => options.network_off = true,
                other => return Err(format!("--network takes auto or off, not {other:?}")),
            },
            "cgroup" => options.cgroup = Some(PathBuf::from(value)),
            "hide" => options.hide.push(PathBuf::from(value)),
            "limits-cgroup" => options.limits_cgroups.push(text(&name, value)?),
            "engine" => engine = Some(text(&name, value)?),
            "pi-dir" => pi.dir = PathBuf::from(value),
            "pi-node" => pi.node = PathBuf::from(value),
            "pi-grant" => pi.grant = Some(text(&name, value)?),
            "pi-transcript" => pi.transcript = Some(PathBuf::from(value)),
            "pi-workspace" => pi.workspace = Some(PathBuf::from(value)),
            other => return Err(format!("unknown option --{other}")),
        }
    }
    if let Some(extra) = flags.rest().first() {
        return Err(format!("unexpected argument {extra:?}"));
    }
    match engine.as_deref() {
        None | Some("rust") => Ok((options, None)),
        Some("pi") => {
            if pi.node.as_os_str().is_empty() {
                pi.node = PathBuf::from("node");
            }
            Ok((options, Some(pi)))
        }
        Some(other) => Err(format!("--engine takes rust or pi, not {other:?}")),
    }
}

fn parse_tool_exec(args: Vec<OsString>) -> Result<ToolExecOptions, String> {
    let (mut access, mut root, mut scratch) = (None, None, None);
    let mut writable = Vec::new();
    let mut flags = Flags::new(args);
    while let Some((name, value)) = flags.next()? {
        match name.as_str() {
            "access" => match text(&name, value)?.as_str() {
                a @ ("read-only" | "workspace") => access = Some(a.to_owned()),
                other => {
                    return Err(format!(
                        "--access takes read-only or workspace, not {other:?}"
                    ));
                }
            },
            "root" => root = Some(PathBuf::from(value)),
            "scratch" => scratch = Some(PathBuf::from(value)),
            "writable" => writable.push(PathBuf::from(value)),
            other => return Err(format!("unknown option --{other}")),
        }
    }
    let command = flags.rest();
    if command.is_empty() {
        return Err("no command to run".to_owned());
    }
    Ok(ToolExecOptions {
        access: access.ok_or("--access is required")?,
        root: root.ok_or("--root is required")?,
        scratch: scratch.ok_or("--scratch is required")?,
        writable,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_brokers_worker_arguments_parse_in_both_spellings() {
        let (options, pi) = parse_worker(os(&[
            "--lock-fd",
            "3",
            "--lock-fd=4",
            "--hide",
            "/s",
            "--landlock",
            "off",
            "--limits-cgroup",
            "pids=/x",
            "--process-containment-reason",
            "why",
        ]))
        .expect("parses");
        assert_eq!(options.lock_fds, vec![3, 4]);
        assert_eq!(options.hide, vec![PathBuf::from("/s")]);
        assert!(options.landlock_off);
        assert_eq!(options.limits_cgroups, vec!["pids=/x".to_owned()]);
        assert_eq!(options.process_containment_reason.as_deref(), Some("why"));
        assert!(pi.is_none());
    }

    #[test]
    fn the_pi_engine_takes_its_folder_and_node() {
        let (_, pi) = parse_worker(os(&["--engine", "pi", "--pi-dir", "/w"])).expect("parses");
        let pi = pi.expect("pi");
        assert_eq!(pi.dir, PathBuf::from("/w"));
        assert_eq!(pi.node, PathBuf::from("node"));
    }

    #[test]
    fn unknown_or_incomplete_arguments_are_refused_with_the_reason() {
        for (args, why) in [
            (vec!["--nope", "1"], "unknown option --nope"),
            (vec!["--lock-fd"], "--lock-fd needs a value"),
            (vec!["--lock-fd", "x"], "descriptor number"),
            (vec!["--engine", "go"], "--engine takes rust or pi"),
            (vec!["stray"], "unexpected argument"),
        ] {
            let err = parse_worker(os(&args)).expect_err("refused");
            assert!(err.contains(why), "{args:?}: {err}");
        }
    }

    #[test]
    fn tool_exec_takes_its_flags_then_the_command() {
        let options = parse_tool_exec(os(&[
            "--access",
            "workspace",
            "--root",
            "/r",
            "--scratch",
            "/s",
            "--writable",
            "/w",
            "bash",
            "-c",
            "--not-a-flag",
        ]))
        .expect("parses");
        assert_eq!(options.access, "workspace");
        assert_eq!(options.writable, vec![PathBuf::from("/w")]);
        assert_eq!(options.command, os(&["bash", "-c", "--not-a-flag"]));
        let dashed = parse_tool_exec(os(&[
            "--access",
            "read-only",
            "--root",
            "/r",
            "--scratch",
            "/s",
            "--",
            "--x",
        ]))
        .expect("parses");
        assert_eq!(dashed.command, os(&["--x"]));
        assert!(parse_tool_exec(os(&["--access", "read-only"])).is_err());
    }
}
