//! `bash`: one command in the workspace root, in its own process group, with a minimal
//! environment (never the key), stdin from /dev/null, stdout+stderr captured in a private file
//! of the worker's scratch directory (background processes holding a pipe open cannot stall
//! the tool), output capped. The file is created, sized and read through its descriptor only.
//!
//! A command still running at the call's timeout (`toolTimeoutMs`) has its tree killed
//! ([`CallTree`]) and the model gets a tool error naming the timeout, with the output so far;
//! the run goes on.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;

use super::{ToolContext, ToolOutput};
use crate::containment::call_tree::CallTree;
use crate::containment::landlock::Access;

/// A command writing more than this is killed.
const MAX_OUTPUT_FILE: u64 = 16 * 1024 * 1024;
/// Output shown to the model: this much of the head and of the tail.
const HEAD: usize = 16 * 1024;
const TAIL: usize = 32 * 1024;

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, Deserialize)]
pub struct BashArgs {
    command: String,
}

/// How long a killed command's shell may take to be reaped before its output is read.
const REAP_AFTER_KILL: Duration = Duration::from_secs(1);

pub async fn run(ctx: &ToolContext, args: BashArgs, timeout: Duration) -> ToolOutput {
    // Dropping the capture unlinks it.
    let capture = match ctx.scratch.create_file("bash") {
        Ok(capture) => capture,
        Err(e) => return ToolOutput::error(format!("cannot capture output: {e}")),
    };
    run_command(ctx, &args.command, capture.file(), timeout).await
}

/// Runs `command` as a `bash` call runs one (the template's setup command).
pub async fn command(ctx: &ToolContext, command: &str, timeout: Duration) -> ToolOutput {
    let capture = match ctx.scratch.create_file("setup") {
        Ok(capture) => capture,
        Err(e) => return ToolOutput::error(format!("cannot capture output: {e}")),
    };
    run_command(ctx, command, capture.file(), timeout).await
}

/// How the command ended.
enum Ended {
    Exited(i32),
    Overflow,
    TimedOut,
}

async fn run_command(
    ctx: &ToolContext,
    command: &str,
    capture: &File,
    timeout: Duration,
) -> ToolOutput {
    let (mut cmd, shell) = match shell_command(ctx, command, capture) {
        Ok(built) => built,
        Err(e) => return ToolOutput::error(format!("cannot capture output: {e}")),
    };
    crate::containment::tool::confine(&mut cmd, &ctx.jail);
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return ToolOutput::error(format!("cannot start {shell}: {e}")),
    };
    let pid = child.id();
    // The worker reaps its children itself (see containment); the handle is not waited on.
    drop(child);
    ctx.containment.register_group(pid);
    // Armed until the command ends: a call dropped mid-way (deadline, cancel) kills it.
    let mut tree = CallTree::new(pid);
    let ended = wait(ctx, pid, capture, &mut tree, timeout).await;
    report(ended, capture, timeout)
}

/// `<shell> -c <command>` in the workspace root, stdin from /dev/null, stdout and stderr
/// into `capture`, with [`minimal_env`]; and the shell it runs (bash where there is one).
/// `Err` when `capture` cannot be shared with the command.
fn shell_command(
    ctx: &ToolContext,
    command: &str,
    capture: &File,
) -> std::io::Result<(Command, &'static str)> {
    let out = capture.try_clone()?;
    let err = out.try_clone()?;
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let mut cmd = Command::new(shell);
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.root)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    minimal_env(ctx, &mut cmd);
    Ok((cmd, shell))
}

/// The few variables a command expects, from the worker's environment or a fallback (never
/// the key): `PATH`, `HOME` (the workspace root when unset), `LANG`, `TMPDIR` (the scratch
/// space when confined to the workspace), `USER`, `LOGNAME`, and `TERM=dumb`.
fn minimal_env(ctx: &ToolContext, cmd: &mut Command) {
    for (name, fallback) in [
        ("PATH", Some(DEFAULT_PATH)),
        ("HOME", None),
        ("LANG", Some("C.UTF-8")),
        ("TMPDIR", Some("/tmp")),
        ("USER", None),
        ("LOGNAME", None),
    ] {
        match (std::env::var_os(name), fallback) {
            (Some(value), _) => {
                cmd.env(name, value);
            }
            (None, Some(value)) => {
                cmd.env(name, value);
            }
            (None, None) => {}
        }
    }
    if std::env::var_os("HOME").is_none() {
        cmd.env("HOME", &ctx.root);
    }
    cmd.env("TERM", "dumb");
    // Confined to the workspace, temporary files go to the scratch space (removed with
    // the worker) instead of a /tmp the command may not write.
    if let Some(ruleset) = ctx.jail.filesystem()
        && matches!(ruleset.access(), Access::Workspace { .. })
    {
        cmd.env("TMPDIR", ctx.scratch.path());
    }
}

/// What the model is told: the exit code (an error unless 0), the overflow or the timeout,
/// with the head and tail of the output.
fn report(ended: Ended, capture: &File, timeout: Duration) -> ToolOutput {
    let shown = shown_output(capture);
    let code = match ended {
        Ended::Exited(code) => code,
        Ended::Overflow => {
            return ToolOutput::error(format!(
                "the command wrote more than {MAX_OUTPUT_FILE} bytes and was killed\n{shown}"
            ));
        }
        Ended::TimedOut => {
            return super::timed_out("bash", timeout, "its processes were killed")
                .with_output(&shown);
        }
    };
    let text = format!("exit code: {code}\n{shown}");
    if code == 0 {
        ToolOutput::ok(text)
    } else {
        ToolOutput {
            text,
            is_error: true,
        }
    }
}

/// Waits for the shell `pid` to exit, killing its group when the output passes the cap and
/// its whole tree at `timeout`.
async fn wait(
    ctx: &ToolContext,
    pid: u32,
    capture: &File,
    tree: &mut CallTree,
    timeout: Duration,
) -> Ended {
    let started = std::time::Instant::now();
    let mut overflow = false;
    loop {
        ctx.containment.reap();
        if let Some(code) = ctx.containment.take_exit(pid) {
            tree.disarm();
            // A command may write past the cap and exit between two looks: its size decides.
            return if overflow || past_cap(capture) {
                Ended::Overflow
            } else {
                Ended::Exited(code)
            };
        }
        if !overflow && past_cap(capture) {
            overflow = true;
            ctx.containment.kill_group(pid);
        }
        if started.elapsed() >= timeout {
            let killed = tree.kill(&ctx.containment).await;
            tracing::info!(
                killed,
                timeout_ms = timeout.as_millis(),
                "bash passed toolTimeoutMs; its tree was killed"
            );
            // Reap the shell, so its exit record does not outlive the call.
            let end = std::time::Instant::now() + REAP_AFTER_KILL;
            while ctx.containment.take_exit(pid).is_none() && std::time::Instant::now() < end {
                ctx.containment.reap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            return Ended::TimedOut;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the command's output passed [`MAX_OUTPUT_FILE`].
fn past_cap(capture: &File) -> bool {
    capture.metadata().is_ok_and(|m| m.len() > MAX_OUTPUT_FILE)
}

/// What the model is shown of the output: all of it when it is short, else its head and its
/// tail. Read at offsets (the shared file position stays where the command left it: a
/// background process may still write), and never more than [`HEAD`] + [`TAIL`] bytes,
/// whatever the command left in the file.
fn shown_output(file: &File) -> String {
    let len = file.metadata().map_or(0, |m| m.len());
    let whole = (HEAD + TAIL) as u64;
    if len <= whole {
        return String::from_utf8_lossy(&read_at(file, 0, whole as usize)).into_owned();
    }
    let head = read_at(file, 0, HEAD);
    let tail = read_at(file, len - TAIL as u64, TAIL);
    format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        String::from_utf8_lossy(&head),
        len - whole,
        String::from_utf8_lossy(&tail)
    )
}

/// Up to `max` bytes of `file` from `offset`.
fn read_at(file: &File, offset: u64, max: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; max];
    let mut filled = 0;
    while filled < max {
        match file.read_at(&mut bytes[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    bytes.truncate(filled);
    bytes
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn short_output_is_shown_whole() {
        let mut file = tempfile::tempfile().expect("temp file");
        file.write_all(b"exit soon\n").expect("write");
        assert_eq!(shown_output(&file), "exit soon\n");
    }

    #[test]
    fn long_output_shows_its_head_and_tail_and_says_what_it_left_out() {
        let file = tempfile::tempfile().expect("temp file");
        // 20 MB, past the cap, most of it a hole: only the head and the tail are read.
        file.set_len(20_000_000).expect("size");
        file.write_all_at(b"first line", 0).expect("head");
        file.write_all_at(b"last line", 20_000_000 - 9)
            .expect("tail");
        let shown = shown_output(&file);
        assert!(shown.starts_with("first line"), "{}", &shown[..20]);
        assert!(shown.ends_with("last line"));
        assert!(shown.contains(&format!(
            "[... {} bytes omitted ...]",
            20_000_000 - HEAD - TAIL
        )));
        assert!(shown.len() < HEAD + TAIL + 64);
        assert!(past_cap(&file));
    }
}
