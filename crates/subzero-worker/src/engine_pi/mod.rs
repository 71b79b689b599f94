//! `subzero-worker worker --engine pi`: the Pi SDK worker's init.
//!
//! The Rust worker's start-up runs as it does for the Rust engine (lock descriptors
//! close-on-exec, non-dumpable subreaper, the cgroups, the view probe, the scratch directory,
//! the Landlock probe). Then, instead of a model loop, this process starts Node running
//! `workers/pi` under the same jail the Rust worker gives its tool processes — Pi's file tools
//! run inside Node, so Node itself is the tool process to confine:
//!
//! - the tools' view (the state directory, the configuration and the key files covered), the
//!   tool bounds, no capability, and Landlock with the grant's write rules plus the scratch
//!   directory (Node's own files) and the child's transcript;
//! - the transcript lies in the hidden state directory: it is opened here, before Node enters
//!   the view, and handed over as a descriptor (Node opens `/proc/self/fd/N`); the Landlock
//!   rule names that one file, so no other path of the state directory is reachable;
//! - Node's stdin, stdout and stderr are this process's: Node speaks the control protocol
//!   itself and says hello (with the containment this start-up probed);
//! - bash commands go through `subzero-worker tool-exec` ([`crate::tool_exec`]).
//!
//! From then on this process only supervises ([`supervise`]): it reaps, ends the tool tree
//! when Node asks (commands that left their process group are re-parented here), forwards
//! termination signals to Node and tears everything down when Node exits.
//!
//! The jail needs the grant before `start_run` (the hello must come first), so the broker
//! passes what it needs on the command line (`--pi-grant`): the tools, the filesystem grant
//! and the tool limits — nothing secret.
#![allow(unsafe_code)]

mod supervise;

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use subzero_protocol as p;

use crate::WorkerOptions;
use crate::containment::landlock::{Access, Grant, Ruleset, Support};
use crate::containment::tool::{self, ToolJail};
use crate::containment::{self, Refused, wire};
use crate::startup::{Started, start_up};

/// The descriptor at which Node finds its channel to this process.
const TREE_FD: i32 = 200;
/// The descriptor at which Node finds the child's transcript.
const TRANSCRIPT_FD: i32 = 201;
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The Pi engine's own arguments.
#[derive(Debug, Clone, Default)]
pub struct PiOptions {
    /// The worker's folder (`workers/pi`, with `node_modules`).
    pub dir: PathBuf,
    /// The Node executable.
    pub node: PathBuf,
    /// What the jail needs of the child's grant (JSON, [`PiGrant`]); absent for a
    /// handshake-only worker, which runs nothing.
    pub grant: Option<String>,
    /// The child's transcript (Pi's session file).
    pub transcript: Option<PathBuf>,
    /// The child's workspace root.
    pub workspace: Option<PathBuf>,
}

/// The part of a grant snapshot the jail is built from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PiGrant {
    tools: Vec<String>,
    write_capable: bool,
    filesystem: Option<serde_json::Value>,
    tool_limits: Option<serde_json::Value>,
}

impl PiGrant {
    /// A wire snapshot carrying these parts (the rest empty), for the jail's builders.
    fn snapshot(&self) -> Result<subzero_protocol::GrantSnapshot, String> {
        let mut value = serde_json::json!({
            "templateId": "pi-jail",
            "description": "the Pi worker's jail",
            "instructions": "-",
            "tools": self.tools,
            "skills": [],
            "mcpServers": [],
            "writeCapable": self.write_capable,
            "limits": {"maxTurns": 1, "deadlineMs": 1, "toolTimeoutMs": 1, "maxOutputTokens": 1},
            "digest": format!("sha256:{}", "0".repeat(64)),
        });
        if let Some(fs) = &self.filesystem {
            value["filesystem"] = fs.clone();
        }
        if let Some(limits) = &self.tool_limits {
            value["toolLimits"] = limits.clone();
        }
        serde_json::from_value(value).map_err(|e| format!("--pi-grant is malformed: {e}"))
    }
}

/// Runs the Pi engine; returns the exit code (Node's, or 2 when it could not start).
pub fn run_pi(options: WorkerOptions, pi: PiOptions) -> i32 {
    let Started {
        scratch,
        process,
        holders,
    } = match start_up(&options) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let mut support = match containment::support(&process, holders) {
        Ok(support) => support,
        Err(err) => {
            tracing::error!(%err, "the containment receipts break the contract");
            return 2;
        }
    };
    let root = pi
        .workspace
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let grant: PiGrant = match pi.grant.as_deref().map(serde_json::from_str).transpose() {
        Ok(grant) => grant.unwrap_or_default(),
        Err(e) => {
            tracing::error!(%e, "--pi-grant is malformed");
            return 2;
        }
    };
    let transcript = match pi.transcript.as_deref().map(open_transcript).transpose() {
        Ok(fd) => fd,
        Err(e) => {
            tracing::error!(%e, "cannot open the transcript");
            return 2;
        }
    };
    let jail = node_jail(&grant, &root, scratch.path(), pi.transcript.as_deref());
    if let Err(err) = receipts(&mut support, &jail) {
        tracing::error!(%err, "the containment receipts break the contract");
        return 2;
    }
    let (here, there) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => {
            tracing::error!(%e, "cannot make the tree channel");
            return 2;
        }
    };
    let mut cmd = node_command(&pi, &root, scratch.path(), &support, &grant, &jail);
    place(
        &mut cmd,
        there.as_raw_fd(),
        transcript.as_ref().map(AsRawFd::as_raw_fd),
    );
    tool::confine(
        &mut cmd,
        jail.as_ref().map_or(&ToolJail::default(), |(j, _)| j),
    );
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::error!(%e, node = %pi.node.display(), "cannot start Node");
            return 2;
        }
    };
    drop(there);
    drop(transcript);
    let code = supervise::supervise(child.id(), here);
    if let Err(err) = scratch.remove() {
        tracing::warn!(%err, "cannot remove the scratch directory");
    }
    code
}

/// The hello's receipts for this worker: `worker` (Node, which holds the key, is confined as
/// a tool process; each bash command one level further) and a view that names Node.
fn receipts(support: &mut p::ContainmentSupport, jail: &NodeJail) -> Result<(), Refused> {
    use crate::control::short_text;
    let (confined, nested, summary) = match jail {
        Ok((_, Some(_))) => (
            true,
            true,
            "Pi's file tools run inside Node, which holds the key: Node runs as a tool process (the tools' view, the tool bounds, no capability, Landlock allowing writes only where the grant does plus its scratch directory and the child's transcript); each bash command runs in a nested Landlock domain with only stdin, stdout and stderr, which cannot open Node's memory or descriptors".to_owned(),
        ),
        Ok((_, None)) => (
            true,
            false,
            "Pi's file tools run inside Node, which holds the key: Node runs as a tool process (the tools' view, the tool bounds, no capability); without Landlock its writes are not restricted and no nested domain could keep a command from its memory, so bash is not offered".to_owned(),
        ),
        Err(why) => (
            false,
            false,
            format!("none: Node's jail cannot be built ({why}); every run is refused"),
        ),
    };
    support.worker = Some(p::WorkerReceipt {
        name: p::WorkerName::Pi,
        key_holder_confined: confined,
        nested_commands: nested,
        summary: wire(short_text(&summary), "worker.summary")?,
    });
    if let Some(view) = &mut support.view {
        let summary = short_text(&format!("Node and its tools: {}", view.summary.as_str()));
        view.summary = wire(summary, "view.summary")?;
    }
    Ok(())
}

/// The transcript, created if it is new (mode 0600), opened before the view hides it.
fn open_transcript(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32)
        .open(path)?;
    Ok(file.into())
}

/// Node's jail: the tools' jail with Landlock widened to the scratch directory and the
/// transcript; `Err` is the `unsupported_grant` message Node answers every run with.
type NodeJail = Result<(ToolJail, Option<Vec<OsString>>), String>;

fn node_jail(grant: &PiGrant, root: &Path, scratch: &Path, transcript: Option<&Path>) -> NodeJail {
    let snapshot = grant.snapshot()?;
    let mut jail = tool::prepare(&snapshot, root, scratch)?;
    let Support::Available { abi } = containment::landlock::support() else {
        // No nested domain can keep bash from Node's memory: no bash (see tool_exec).
        return Ok((jail, None));
    };
    let access = Grant::of(&snapshot).access;
    let ruleset = Ruleset::build(&access, *abi, root, scratch)
        .and_then(|r| r.allow_writes(scratch).map(|()| r))
        .and_then(|r| match transcript {
            Some(t) => r.allow_writes(t).map(|()| r),
            None => Ok(r),
        })
        .map_err(|e| {
            format!("unsupported_grant: the Pi worker's Landlock ruleset cannot be built: {e}")
        })?;
    jail.filesystem = Some(Arc::new(ruleset));
    Ok((jail, Some(tool_exec_prefix(&access, root, scratch))))
}

/// `subzero-worker tool-exec …` with the grant's rules, as Node prefixes every bash command.
fn tool_exec_prefix(access: &Access, root: &Path, scratch: &Path) -> Vec<OsString> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let mut prefix: Vec<OsString> = vec![exe.into(), "tool-exec".into(), "--access".into()];
    prefix.push(access.name().into());
    prefix.extend(["--root".into(), root.as_os_str().to_owned()]);
    prefix.extend(["--scratch".into(), scratch.as_os_str().to_owned()]);
    if let Access::Workspace { writable } = access {
        for path in writable {
            prefix.extend(["--writable".into(), path.as_os_str().to_owned()]);
        }
    }
    prefix
}

fn node_command(
    pi: &PiOptions,
    root: &Path,
    scratch: &Path,
    support: &p::ContainmentSupport,
    grant: &PiGrant,
    jail: &NodeJail,
) -> std::process::Command {
    let agent = scratch.join("pi-agent");
    let mut cmd = std::process::Command::new(&pi.node);
    cmd.arg(pi.dir.join("src/main.js"))
        .current_dir(root)
        .env_clear()
        .env("PATH", DEFAULT_PATH)
        .env("LANG", "C.UTF-8")
        .env("HOME", &agent)
        .env("TMPDIR", scratch)
        .env("PI_CODING_AGENT_DIR", &agent)
        .env("PI_OFFLINE", "1")
        .env("PI_TELEMETRY", "0")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("SUBZERO_PI_SCRATCH", scratch)
        .env(
            "SUBZERO_PI_CONTAINMENT",
            serde_json::to_string(support).unwrap_or_default(),
        )
        .env("SUBZERO_PI_TREE_FD", TREE_FD.to_string());
    if let Some(filter) = std::env::var_os("SUBZERO_LOG") {
        cmd.env("SUBZERO_LOG", filter);
    }
    if pi.transcript.is_some() {
        cmd.env("SUBZERO_PI_TRANSCRIPT_FD", TRANSCRIPT_FD.to_string());
    }
    match jail {
        Ok((_, Some(prefix))) if grant.tools.iter().any(|t| t == "bash") || pi.grant.is_none() => {
            let words: Vec<String> = prefix
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect();
            cmd.env(
                "SUBZERO_PI_TOOL_EXEC",
                serde_json::Value::from(words).to_string(),
            );
        }
        Ok(_) => {}
        Err(why) => {
            cmd.env("SUBZERO_PI_REFUSE", why);
        }
    }
    cmd
}

/// In the forked child, first of all: the tree channel and the transcript at their fixed
/// descriptors (`dup2` leaves them open across exec), and SIGTERM when this process dies.
fn place(cmd: &mut std::process::Command, tree: i32, transcript: Option<i32>) {
    let transcript = transcript.unwrap_or(-1);
    // SAFETY: the hook runs between fork and exec and only calls dup2 and prctl, which are
    // async-signal-safe, on descriptors that are open in the child. (`dup2` onto a bare
    // descriptor number is libc's: rustix's wants an owned target.)
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(tree, TREE_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if transcript >= 0 && libc::dup2(transcript, TRANSCRIPT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Node ends its run and its tools when this process dies (outside a namespace,
            // nothing else would end it).
            let term = Some(subzero_sys::signal::Signal::TERM);
            rustix::process::set_parent_process_death_signal(term)?;
            Ok(())
        });
    }
}
