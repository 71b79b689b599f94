//! The hostile cases of the process-containment tests, shared by every path: a coder's
//! `bash` starts six escapees — setsid + nohup, a double fork, `disown`, `trap '' TERM`,
//! a new session that closes every descriptor (so it holds none of the locks), a plain
//! background job — and then the run is stopped, the worker SIGKILLed, the broker
//! SIGKILLed, or worker and broker SIGKILLed together. Whatever happened, nothing of the
//! tree may be left within a second, and no second write-capable run may be admitted to
//! the workspace while any of it lives.
//!
//! Also the machine's cgroup v2 as a test sees it (the broker a test starts runs in the
//! test's own cgroup), to find a worker's cgroup and to skip, saying why, where none is
//! writable.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::faults::{
    Reaper, eventually, marked, read_proc, sigkill, unique_mark, wait_for, workers_of,
};
use crate::support::mcp::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::{BrokerCommand, McpSession, RunAs};

/// `nobody`: the unprivileged user the broker runs as when the tests run as root.
pub const NOBODY: RunAs = RunAs {
    uid: 65534,
    gid: 65534,
};

/// How long the whole tree may take to be gone after the stop or the kill.
pub const GONE_WITHIN: Duration = Duration::from_secs(1);

/// The escapes, one line each, each ending in a `sleep 1000` that carries the mark in its
/// environment, and a foreground `sleep` that keeps the tool call running.
fn escapes(mark: &str) -> Vec<String> {
    vec![
        format!("export {mark}"),
        // setsid + nohup
        "setsid nohup sleep 1000 >/dev/null 2>&1 &".to_owned(),
        // double fork: the sleep's parent exits at once
        "( ( sleep 1000 & ) & )".to_owned(),
        // disown
        "sleep 1000 & disown".to_owned(),
        // ignores SIGTERM (the ignored disposition survives exec)
        "bash -c \"trap '' TERM; exec sleep 1000\" &".to_owned(),
        // a new session that closes every descriptor, the lock descriptors included
        "setsid bash -c 'for f in /proc/$$/fd/*; do n=${f##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done; exec sleep 1000 </dev/null >/dev/null 2>&1' &".to_owned(),
        // plain background
        "sleep 1000 &".to_owned(),
        "sleep 1000".to_owned(),
    ]
}

/// On the cgroup path, one more escape: a process that moves itself out of its cgroup
/// into the broker's (which the user may write) before it sleeps. Landlock keeps a
/// coder's tools from opening `cgroup.procs` for writing, so it stays where it was.
fn escape_script_for(path: Path_, mark: &str) -> (String, usize) {
    let mut lines = escapes(mark);
    if path == Path_::Cgroup {
        let own = own_cgroup().expect("a writable cgroup v2");
        let out = format!(
            "bash -c 'echo $$ > {}/cgroup.procs; exec sleep 1000' 2>/dev/null &",
            own.display()
        );
        lines.insert(lines.len() - 1, out);
    }
    // Every line but the first starts one marked sleep.
    let sleeps = lines.len() - 1;
    (lines.join("\n"), sleeps)
}

/// The marked `sleep`s alive now.
pub fn marked_sleeps(mark: &str) -> Vec<u32> {
    marked(mark)
        .into_iter()
        .filter(|pid| {
            read_proc(*pid).is_some_and(|p| p.argv.first().is_some_and(|a| a.ends_with("sleep")))
        })
        .collect()
}

/// How many marked sleeps hold the workspace's writer slot, and how many do not: on the
/// subreaper fallback the one that closed its descriptors holds none and every other one
/// inherited the child lock *and* the slots; on every other path none holds any.
fn writer_slot_holders_among(mark: &str, locks: &Path) -> (usize, usize) {
    let mut holding = 0;
    let mut not_holding = 0;
    for pid in marked_sleeps(mark) {
        let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.flatten()
                    .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                    .filter(|t| {
                        t.starts_with(locks.join("slots"))
                            && t.to_string_lossy().contains(".writer.")
                    })
                    .count()
            })
            .unwrap_or(0);
        if held > 0 {
            holding += 1;
        } else {
            not_holding += 1;
        }
    }
    (holding, not_holding)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Stop,
    KillWorker,
    KillBroker,
    KillWorkerAndBroker,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path_ {
    /// The default, as the user running the tests (root in CI: no user namespace).
    Namespace,
    /// The default, as `nobody` when the tests run as root (inside a user namespace).
    NamespaceUnprivileged,
    /// `[containment] process = "subreaper"`.
    Fallback,
    /// `[containment] process = "cgroup"`: a cgroup v2 per worker, `cgroup.kill`.
    Cgroup,
}

impl Path_ {
    /// The `[containment] process` value this path configures, if any.
    fn switch(self) -> Option<&'static str> {
        match self {
            Path_::Namespace | Path_::NamespaceUnprivileged => None,
            Path_::Fallback => Some("subreaper"),
            Path_::Cgroup => Some("cgroup"),
        }
    }

    /// The `containment.process.mode` every receipt must name.
    pub fn mode(self) -> &'static str {
        match self {
            Path_::Namespace | Path_::NamespaceUnprivileged => "pid-namespace",
            Path_::Fallback => "subreaper",
            Path_::Cgroup => "cgroup",
        }
    }
}

pub struct Case {
    pub env: Env,
    pub user: Option<RunAs>,
    exe: PathBuf,
    _spare: tempfile::TempDir,
}

impl Case {
    pub fn new(path: Path_) -> Case {
        let env = Env::new(Vec::new());
        if let Some(switch) = path.switch() {
            let config = std::fs::read_to_string(env.config()).expect("config");
            std::fs::write(
                env.config(),
                format!("{config}\n[containment]\nprocess = \"{switch}\"\n"),
            )
            .expect("config");
        }
        let root = nix::unistd::geteuid().is_root();
        let user = (path == Path_::NamespaceUnprivileged && root).then_some(NOBODY);
        Case::with_user(env, user)
    }

    /// A case in `env` whose brokers run as `user` (the files of `env` are chowned).
    pub fn with_user(env: Env, user: Option<RunAs>) -> Case {
        let spare = tempfile::tempdir().expect("spare dir");
        let exe = match user {
            Some(user) => {
                chown_tree(env.dir.path(), user);
                binary_for_others(spare.path())
            }
            None => PathBuf::from(env!("CARGO_BIN_EXE_subzero")),
        };
        Case {
            env,
            user,
            exe,
            _spare: spare,
        }
    }

    pub fn command(&self, log: &str) -> BrokerCommand {
        let mut cmd = self.env.command(log);
        cmd.exe = self.exe.clone();
        cmd
    }

    pub async fn broker(&self, log: &str) -> McpSession {
        McpSession::start_as(&self.command(log), self.user)
            .await
            .expect("broker starts")
    }
}

pub fn chown_tree(path: &Path, user: RunAs) {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read dir").flatten() {
            chown_tree(&entry.path(), user);
        }
    }
}

/// The `subzero` binary, or a copy of it other users can run.
pub fn binary_for_others(spare: &Path) -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_subzero"));
    let open = exe
        .ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.mode() & 0o001 != 0));
    if open {
        return exe;
    }
    // The broker starts its workers and lock holders from the binaries next to its own.
    std::fs::set_permissions(spare, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    for name in ["subzero", "subzero-worker", "subzero-hold"] {
        let copy = spare.join(name);
        std::fs::copy(exe.with_file_name(name), &copy).expect("copy a subzero binary");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod exe");
    }
    spare.join("subzero")
}

/// Watches the workspace's writer slot from outside the tree while a stop or a kill is
/// under way: every millisecond it tries to take the slot's lock, and whenever it gets it
/// (while holding it) it looks for live processes of the tree. Any it finds is a moment
/// in which a second writer could have been admitted while the first tree lived. It has
/// probed once when [`LockWatcher::start`] returns.
struct LockWatcher {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, Vec<Vec<u32>>)>,
}

impl LockWatcher {
    fn start(state: &Path, mark: &str) -> LockWatcher {
        let slots: Vec<PathBuf> = std::fs::read_dir(state.join("locks/slots"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.to_string_lossy().contains(".writer."))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            !slots.is_empty(),
            "no writer slot under {}",
            state.display()
        );
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let mark = mark.to_owned();
        let (first, first_taken) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut probes = 0;
            let mut violations = Vec::new();
            loop {
                for slot in &slots {
                    let Ok(file) = std::fs::File::open(slot) else {
                        continue;
                    };
                    probes += 1;
                    if let Ok(held) =
                        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
                    {
                        let alive = marked(&mark);
                        if !alive.is_empty() {
                            violations.push(alive);
                        }
                        drop(held);
                    }
                }
                let _ = first.send(());
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            (probes, violations)
        });
        // The first round is taken before the action it watches: a tree gone within
        // milliseconds on a loaded machine still had the slot probed while it lived.
        let _ = first_taken.recv();
        LockWatcher { done, thread }
    }

    /// Stops watching: how many probes ran and what lived while the slot was free.
    fn stop(self) -> (u64, Vec<Vec<u32>>) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().expect("the lock watcher")
    }
}

/// Tries to admit a second write-capable run in the workspace until one is admitted or
/// `limit` passes; at the moment one is admitted, nothing of the first tree may live.
/// Returns whether one was admitted.
async fn no_second_writer_while_the_tree_lives(
    s: &McpSession,
    env: &Env,
    mark: &str,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let reply = call(
            s,
            "subzero_spawn",
            json!({"prompt": "second writer", "templateId": "coder", "model": env.model()}),
        )
        .await;
        if !reply.is_error {
            let alive = marked(mark);
            assert!(
                alive.is_empty(),
                "a second writer was admitted while the first writer's tree lived: {alive:?}"
            );
            return true;
        }
        assert_eq!(reply.code(), Some("workspace_busy"), "{}", reply.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The child's `containment.process` as its snapshot reports it.
pub async fn process_receipt(s: &McpSession, child: &str) -> Value {
    let snap = ok(
        s,
        "subzero_get",
        json!({"childId": child, "containment": true}),
    )
    .await;
    snap["containment"]["process"].clone()
}

/// Checks the receipts of a running child on `path`: its snapshot and `subzero_info`
/// name the mode, and a forced fallback says why namespaces are not used.
async fn check_receipts(s: &McpSession, child: &str, path: Path_) {
    let receipt = process_receipt(s, child).await;
    assert_eq!(receipt["mode"], path.mode(), "{receipt:#}");
    if path.switch().is_some() {
        assert!(
            receipt["reason"]
                .as_str()
                .is_some_and(|r| r.contains("[containment]")),
            "{receipt:#}"
        );
    }
    let info = ok(s, "subzero_info", json!({})).await;
    assert_eq!(
        info["enforcement"]["containment"]["process"]["mode"],
        path.mode(),
        "{:#}",
        info["enforcement"]
    );
}

/// On the cgroup path: every escapee is in the `tools` cgroup of one worker cgroup of
/// this broker; returns that worker cgroup.
fn worker_cgroup_of_the_escapees(mark: &str, broker: u32) -> PathBuf {
    let dirs: Vec<PathBuf> = marked_sleeps(mark)
        .into_iter()
        .map(|pid| cgroup_dir_of(pid).unwrap_or_else(|| panic!("the cgroup of {pid}")))
        .collect();
    let first = dirs.first().expect("escapees").clone();
    assert!(
        dirs.iter().all(|d| *d == first),
        "the escapees are in different cgroups: {dirs:?}"
    );
    assert_eq!(first.file_name().and_then(|n| n.to_str()), Some("tools"));
    let worker = first.parent().expect("worker cgroup").to_path_buf();
    let name = worker.file_name().map(|n| n.to_string_lossy().into_owned());
    assert!(
        name.as_deref()
            .is_some_and(|n| n.starts_with(&format!("subzero-{broker}-"))),
        "the worker cgroup {} is not named for broker {broker}",
        worker.display()
    );
    worker
}

pub async fn run_case(path: Path_, action: Action) {
    let case = Case::new(path);
    let env = &case.env;
    let mark = unique_mark(env.dir.path());
    // The first request gets the escapes; the second writer's a text.
    let (script, escapees) = escape_script_for(path, &mark);
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": script}).to_string(),
    ));
    env.server.push(Reply::text("second writer done"));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let s = case.broker("broker1").await;
    let broker = reaper.broker(s.pid());

    let (child, run) = spawn(&s, env, "coder", "Run the escapes").await;
    let sleeps = wait_for(Duration::from_secs(20), || {
        let found = marked_sleeps(&mark);
        (found.len() >= escapees).then_some(found)
    });
    assert!(
        sleeps.is_some(),
        "the escapes did not all start: {:?}",
        marked_sleeps(&mark)
    );
    let locks = env.state_dir().join("locks");
    let (holding, not_holding) =
        writer_slot_holders_among(&mark, &locks.canonicalize().unwrap_or(locks));
    // Only on the subreaper fallback do tool processes hold the locks (every escapee but
    // the one that closed its descriptors); elsewhere the broker and the worker hold them
    // close-on-exec and no tool process has one.
    let expected = match path {
        Path_::Fallback => (escapees - 1, 1),
        _ => (0, escapees),
    };
    assert_eq!(
        (holding, not_holding),
        expected,
        "writer slot holders among the escapees"
    );
    check_receipts(&s, &child, path).await;
    let cgroup = (path == Path_::Cgroup).then(|| worker_cgroup_of_the_escapees(&mark, broker));
    // The worker: the `subzero-worker worker` process (the broker's child).
    let worker = workers_of(broker);
    assert_eq!(worker.len(), 1, "one worker: {worker:?}");

    let watcher = LockWatcher::start(&env.state_dir(), &mark);
    let started = Instant::now();
    let second = match action {
        Action::Stop => {
            let stopped = ok(
                &s,
                "subzero_stop",
                json!({"childId": child, "expectedRunId": run, "waitMs": 5000}),
            )
            .await;
            assert_eq!(stopped["confirmed"], true, "{stopped:#}");
            assert!(
                marked(&mark).is_empty(),
                "the stop was confirmed while the tree lived: {:?}",
                marked(&mark)
            );
            Some(s)
        }
        Action::KillWorker => {
            sigkill(worker[0]);
            Some(s)
        }
        Action::KillBroker => {
            sigkill(broker);
            drop(s);
            None
        }
        Action::KillWorkerAndBroker => {
            sigkill(worker[0]);
            sigkill(broker);
            drop(s);
            None
        }
    };
    let gone = eventually(GONE_WITHIN, || marked(&mark).is_empty());
    let took = started.elapsed();
    assert!(
        gone,
        "{action:?} on the {path:?} path left {:?} after {took:?}",
        marked(&mark)
    );
    eprintln!("{action:?} on the {path:?} path: tree gone after {took:?}");
    let (probes, violations) = watcher.stop();
    assert!(
        violations.is_empty(),
        "{action:?} on the {path:?} path: the writer slot was free while these lived: {violations:?}"
    );
    assert!(probes > 0, "the writer slot was never probed");

    // A second writer: from the same broker, or from a new one after a broker crash.
    let s = match second {
        Some(s) => s,
        None => {
            let s = case.broker("broker2").await;
            reaper.broker(s.pid());
            s
        }
    };
    assert!(
        no_second_writer_while_the_tree_lives(&s, env, &mark, Duration::from_secs(10)).await,
        "no second writer was admitted once the tree was gone"
    );
    if action == Action::KillWorker {
        // Nobody asked for a stop: the run ended without a confirmed result.
        let snap = settle(&s, &child, Duration::from_secs(10)).await;
        assert_eq!(snap["lastRun"]["status"], "interrupted", "{snap:#}");
    }
    if let Some(cgroup) = cgroup {
        // Its broker (or, after a crash, the next one) removes the emptied cgroup.
        assert!(
            eventually(Duration::from_secs(2), || !cgroup.exists()),
            "the worker cgroup {} was left behind",
            cgroup.display()
        );
    }
    s.close().await.expect("close");
}

/// The cgroup v2 directory of this test process (and of the brokers it starts), or why
/// this machine has none a test can use: no cgroup2 mount, no `0::` line, or a subtree
/// this user cannot make a cgroup with `cgroup.kill` in.
pub fn own_cgroup() -> Result<PathBuf, String> {
    let dir = mounted_own_cgroup()?;
    // One probe per call: the tests that ask run at once in this one process.
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let probe = dir.join(format!("subzero-test-probe-{}-{n}", std::process::id()));
    std::fs::create_dir(&probe)
        .map_err(|e| format!("cannot make a cgroup under {}: {e}", dir.display()))?;
    let kill = probe.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&probe);
    if !kill {
        return Err(format!(
            "cgroups under {} have no cgroup.kill",
            dir.display()
        ));
    }
    Ok(dir)
}

/// The `0::` path of `/proc/<pid>/cgroup`.
fn cgroup_path_of(pid: &str) -> Option<String> {
    let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    membership
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Where this process's cgroup is in the mounted cgroup2 hierarchy.
fn mounted_own_cgroup() -> Result<PathBuf, String> {
    let path = cgroup_path_of("self").ok_or("no `0::` line in /proc/self/cgroup")?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mount = mountinfo
        .lines()
        .filter_map(|l| l.split_once(" - "))
        .filter(|(_, tail)| tail.starts_with("cgroup2 "))
        .find_map(|(fields, _)| {
            let fields: Vec<&str> = fields.split_whitespace().collect();
            (fields.get(3) == Some(&"/")).then(|| PathBuf::from(fields[4]))
        })
        .ok_or("no cgroup2 mount of the whole hierarchy in /proc/self/mountinfo")?;
    Ok(mount.join(path.trim_start_matches('/')))
}

/// The cgroup v2 directory `pid` is in (below this process's own cgroup).
pub fn cgroup_dir_of(pid: u32) -> Option<PathBuf> {
    let path = cgroup_path_of(&pid.to_string())?;
    let own_path = cgroup_path_of("self")?;
    let below = path.strip_prefix(own_path.trim_end_matches('/'))?;
    Some(
        mounted_own_cgroup()
            .ok()?
            .join(below.trim_start_matches('/')),
    )
}
