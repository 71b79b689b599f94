//! `bash`: one command in the workspace root, in its own process group, with a minimal
//! environment (never the key), stdin from /dev/null, stdout+stderr captured in a scratch file
//! (background processes holding a pipe open cannot stall the tool), output capped.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;

use super::{ToolContext, ToolOutput};

/// A command writing more than this is killed.
const MAX_OUTPUT_FILE: u64 = 16 * 1024 * 1024;
/// Output shown to the model: this much of the head and of the tail.
const HEAD: usize = 16 * 1024;
const TAIL: usize = 32 * 1024;

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

static NEXT: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Deserialize)]
pub struct BashArgs {
    command: String,
}

pub async fn run(ctx: &ToolContext, args: BashArgs) -> ToolOutput {
    let out_path = ctx
        .scratch
        .join(format!("bash-{}.out", NEXT.fetch_add(1, Ordering::Relaxed)));
    let result = run_command(ctx, &args.command, &out_path).await;
    let _ = std::fs::remove_file(&out_path);
    result
}

async fn run_command(ctx: &ToolContext, command: &str, out_path: &Path) -> ToolOutput {
    let out = match std::fs::File::create(out_path) {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(format!("cannot capture output: {e}")),
    };
    let err = match out.try_clone() {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(format!("cannot capture output: {e}")),
    };
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
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);

    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return ToolOutput::error(format!("cannot start {shell}: {e}")),
    };
    let pid = child.id();
    // The worker reaps its children itself (see containment); the handle is not waited on.
    drop(child);
    ctx.containment.register_group(pid);

    let mut overflow = false;
    let code = loop {
        ctx.containment.reap();
        if let Some(code) = ctx.containment.take_exit(pid) {
            break code;
        }
        if !overflow && std::fs::metadata(out_path).is_ok_and(|m| m.len() > MAX_OUTPUT_FILE) {
            overflow = true;
            ctx.containment.kill_group(pid);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let bytes = std::fs::read(out_path).unwrap_or_default();
    let shown = head_and_tail(&bytes);
    if overflow {
        return ToolOutput::error(format!(
            "the command wrote more than {MAX_OUTPUT_FILE} bytes and was killed\n{shown}"
        ));
    }
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

fn head_and_tail(bytes: &[u8]) -> String {
    if bytes.len() <= HEAD + TAIL {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let head = String::from_utf8_lossy(&bytes[..HEAD]);
    let tail = String::from_utf8_lossy(&bytes[bytes.len() - TAIL..]);
    format!(
        "{head}\n[... {} bytes omitted ...]\n{tail}",
        bytes.len() - HEAD - TAIL
    )
}
