//! The soak's world: one workspace (a git repository with a commit, so coders may have
//! checkouts of their own), one state directory (a small tmpfs when the soak runs as root,
//! so the disk can be filled) and the checkouts beside it, one configuration, the model
//! server, and 1–3 real `subzero mcp` brokers talked to over stdio by rmcp's client.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use subzero_protocol::{ErrorBody, ErrorCode};
use subzero_testkit::mcp_client::{BrokerCommand, McpSession};

use crate::kernel;
use crate::model::Model;

/// The key the model is called with. The soak searches every file for it at the end.
pub const KEY: &str = "sk-soak-5f0c2b9e7d1a4c36b8e0";
/// The credential reference configured for the model.
pub const CREDENTIAL: &str = "soak";
/// The state directory's size when it is a tmpfs.
const TMPFS_SIZE: &str = "size=48m";

/// What a call got back.
#[derive(Clone, Debug)]
pub enum Answer {
    /// The structured content of a successful call.
    Ok(Value),
    /// A tool error with its typed body.
    Refused(ErrorCode, String),
    /// An answer outside the contract: a JSON-RPC error, a tool error without a typed body.
    Broken(String),
    /// The broker was down, or was killed while the call was in flight.
    Lost,
    /// No answer within the call's bound.
    Unanswered,
}

#[derive(Debug)]
struct BrokerSlot {
    session: Option<Arc<McpSession>>,
    pid: Option<u32>,
    /// Bumped at every kill: a call that fails under a newer generation was cut by a fault.
    generation: u64,
}

/// One soak run's environment.
#[derive(Debug)]
pub struct World {
    /// Canonical path of the run's directory.
    pub root: PathBuf,
    dir: Option<tempfile::TempDir>,
    /// A git repository with one commit, so coders may be isolated.
    pub workspace: PathBuf,
    pub state: PathBuf,
    /// Where the brokers make isolated checkouts: `<state>-checkouts/<child>`.
    pub checkouts: PathBuf,
    config: PathBuf,
    exe: PathBuf,
    pub model: Model,
    /// Whether the state directory is a tmpfs of its own (the full-disk fault needs it).
    pub tmpfs: bool,
    brokers: Mutex<Vec<BrokerSlot>>,
    paused: Mutex<Vec<u32>>,
    starts: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl World {
    /// Makes the directories, the tmpfs, the config and the model; starts no broker yet.
    pub fn new(bin_dir: &Path, brokers: usize) -> Result<World, String> {
        let exe = bin_dir.join("subzero");
        for name in ["subzero", "subzero-worker", "subzero-hold"] {
            if !bin_dir.join(name).is_file() {
                return Err(format!(
                    "{} is missing: build the binaries first (cargo build -p subzero)",
                    bin_dir.join(name).display()
                ));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("subzero-soak-")
            .tempdir()
            .map_err(|e| format!("cannot make the soak directory: {e}"))?;
        let root = dir
            .path()
            .canonicalize()
            .map_err(|e| format!("soak directory: {e}"))?;
        let workspace = root.join("workspace");
        let state = root.join("state");
        let make =
            |p: &Path| std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()));
        make(&workspace.join("src"))?;
        make(&workspace.join("notes"))?;
        make(&state)?;
        make(&root.join("logs"))?;
        let files = [
            (
                "README.md",
                "# Soak project\n\nA workspace for the soak's children.\n",
            ),
            ("src/lib.rs", "pub fn soak() -> u32 {\n    42\n}\n"),
            (
                "notes/plan.md",
                "The soak reads, greps and lists this tree.\n",
            ),
        ];
        for (name, text) in files {
            std::fs::write(workspace.join(name), text).map_err(|e| format!("{name}: {e}"))?;
        }
        crate::repo::init(&workspace)
            .map_err(|e| format!("cannot make the workspace a git repository: {e}"))?;
        let tmpfs = mount_tmpfs(&state);
        if !tmpfs {
            return Err(format!(
                "cannot mount a tmpfs at {} for the full-disk fault (mount -t tmpfs failed)",
                state.display()
            ));
        }
        let model = Model::start().map_err(|e| format!("cannot start the soak model: {e}"))?;
        let config = root.join("config.toml");
        std::fs::write(&config, config_text(&model.server.origin()))
            .map_err(|e| format!("config: {e}"))?;
        Ok(World {
            checkouts: root.join("state-checkouts"),
            root,
            dir: Some(dir),
            workspace,
            state,
            config,
            exe,
            model,
            tmpfs,
            brokers: Mutex::new(
                (0..brokers)
                    .map(|_| BrokerSlot {
                        session: None,
                        pid: None,
                        generation: 0,
                    })
                    .collect(),
            ),
            paused: Mutex::new(Vec::new()),
            starts: AtomicU64::new(0),
        })
    }

    /// Keeps the run's directory (logs, database, transcripts) after the run.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(dir) = self.dir.take() {
            let _ = dir.keep();
        }
        self.root.clone()
    }

    pub fn broker_count(&self) -> usize {
        lock(&self.brokers).len()
    }

    /// The model argument of spawn and resume.
    pub fn model_ref(&self) -> Value {
        serde_json::json!({
            "url": self.model.server.base_url(),
            "model": "soak",
            "credentialRef": CREDENTIAL,
        })
    }

    /// Starts broker `b` (retrying while its start fails, e.g. on a full disk) and returns
    /// whether it is up within `limit`.
    pub async fn start_broker(&self, b: usize, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let n = self.starts.fetch_add(1, Ordering::Relaxed);
            let command = BrokerCommand {
                exe: self.exe.clone(),
                workspace: self.workspace.clone(),
                state_dir: self.state.clone(),
                config: self.config.clone(),
                env: vec![
                    ("SOAK_MODEL_KEY".into(), KEY.into()),
                    ("SUBZERO_LOG".into(), "info".into()),
                ],
                log_file: Some(self.root.join(format!("logs/broker-{b}-{n}.log"))),
            };
            match McpSession::start(&command).await {
                Ok(session) => {
                    let mut slots = lock(&self.brokers);
                    slots[b].pid = session.pid();
                    slots[b].session = Some(Arc::new(session));
                    return Ok(());
                }
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("broker {b} did not start within {limit:?}: {e}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Whether broker `b` is up.
    pub fn broker_up(&self, b: usize) -> bool {
        lock(&self.brokers)[b].session.is_some()
    }

    /// SIGKILLs broker `b`; returns its pid. Calls in flight on it end as [`Answer::Lost`].
    pub fn kill_broker(&self, b: usize) -> Option<u32> {
        let mut slots = lock(&self.brokers);
        let slot = &mut slots[b];
        slot.generation += 1;
        let pid = slot.pid.take();
        if let Some(pid) = pid {
            kernel::signal(pid, nix::sys::signal::Signal::SIGKILL);
        }
        slot.session = None;
        pid
    }

    /// The pid of broker `b`, when up.
    pub fn broker_pid(&self, b: usize) -> Option<u32> {
        lock(&self.brokers)[b].pid
    }

    /// One `tools/call` on broker `b`, bounded by `limit`.
    pub async fn call(&self, b: usize, tool: &str, args: Value, limit: Duration) -> Answer {
        let (session, generation) = {
            let slots = lock(&self.brokers);
            (slots[b].session.clone(), slots[b].generation)
        };
        let Some(session) = session else {
            return Answer::Lost;
        };
        let cut = || lock(&self.brokers)[b].generation != generation;
        match tokio::time::timeout(limit, session.call(tool, args)).await {
            Err(_) if cut() => Answer::Lost,
            Err(_) => Answer::Unanswered,
            Ok(Err(_)) if cut() => Answer::Lost,
            Ok(Err(e)) => Answer::Broken(format!("{tool}: protocol-level failure: {e}")),
            Ok(Ok(reply)) if reply.is_error => match serde_json::from_str::<ErrorBody>(&reply.text)
            {
                Ok(body) => Answer::Refused(body.code, body.message.to_string()),
                Err(e) => Answer::Broken(format!(
                    "{tool}: a tool error without a typed body ({e}): {}",
                    reply.text
                )),
            },
            Ok(Ok(reply)) => Answer::Ok(reply.structured),
        }
    }

    /// Remembers a worker the soak stopped, so recovery can continue it.
    pub fn paused(&self, pid: u32) {
        lock(&self.paused).push(pid);
    }

    /// SIGCONTs every worker the soak stopped.
    pub fn continue_all(&self) {
        for pid in lock(&self.paused).drain(..) {
            kernel::signal(pid, nix::sys::signal::Signal::SIGCONT);
        }
    }

    /// Fills the state directory's file system; returns the filler's path.
    pub fn fill_disk(&self) -> Option<PathBuf> {
        use std::io::Write;
        if !self.tmpfs {
            return None;
        }
        let path = self.state.join("soak-filler");
        let mut file = std::fs::File::create(&path).ok()?;
        let block = vec![0x5a_u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        let mut byte = [0x5a_u8];
        while file.write_all(&byte[..]).is_ok() {
            byte[0] ^= 1;
        }
        Some(path)
    }

    /// Every broker closed as a host closes it (stdin EOF), each given `limit` to exit.
    pub async fn close_brokers(&self) {
        let sessions: Vec<Arc<McpSession>> = {
            let mut slots = lock(&self.brokers);
            slots
                .iter_mut()
                .filter_map(|s| {
                    s.pid = None;
                    s.generation += 1;
                    s.session.take()
                })
                .collect()
        };
        for session in sessions {
            if let Ok(session) = Arc::try_unwrap(session) {
                let _ = tokio::time::timeout(Duration::from_secs(15), session.close()).await;
            }
        }
    }

    /// Kills whatever of the soak is still running (brokers, workers, tools).
    pub fn kill_everything(&self) {
        for _ in 0..3 {
            for p in kernel::soak_processes(&self.root) {
                kernel::signal(p.pid, nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.continue_all();
        self.kill_everything();
        if self.tmpfs {
            if self.dir.is_none() {
                // A kept run keeps its state too: the tmpfs goes, so copy it out first.
                let _ = Command::new("cp")
                    .arg("-a")
                    .arg(&self.state)
                    .arg(self.root.join("state.kept"))
                    .status();
            }
            let _ = Command::new("umount").arg("-l").arg(&self.state).status();
        }
    }
}

/// Mounts a tmpfs at `state` when this process may (root); false otherwise.
fn mount_tmpfs(state: &Path) -> bool {
    if !nix::unistd::geteuid().is_root() {
        return false;
    }
    Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("{TMPFS_SIZE},mode=0700"),
            "tmpfs",
        ])
        .arg(state)
        .status()
        .is_ok_and(|s| s.success())
}

/// The brokers' configuration: the model's credential, small limits so that faults and
/// bounds are reached in seconds, not minutes.
fn config_text(origin: &str) -> String {
    format!(
        r#"[credentials.{CREDENTIAL}]
env = "SOAK_MODEL_KEY"
origins = ["{origin}"]

[limits]
model_idle_timeout_ms = 1500
model_response_bytes = 65536
queued_followups = 4
event_retention = 120

[budgets.default]
max_turns = 6
deadline_ms = 20000
tool_timeout_ms = 3000

[budgets.max]
max_turns = 8
deadline_ms = 30000
tool_timeout_ms = 5000
"#
    )
}
