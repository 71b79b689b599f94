//! Kernel-enforced process containment: a coder's `bash` starts six escapees — setsid +
//! nohup, a double fork, `disown`, `trap '' TERM`, a new session that closes every
//! descriptor (so it holds none of the locks), a plain background job — and then the
//! run is stopped, the worker SIGKILLed, the broker SIGKILLed, or worker and broker
//! SIGKILLed together. Whatever happened, nothing of the tree is left within a second,
//! and no second write-capable run is admitted to the workspace while any of it lives.
//!
//! On the namespace path (the default) every worker is init of its own PID namespace, so
//! the kernel ends the tree; it is tried as root (no user namespace) and, as CI runs as
//! root, as `nobody` (inside a user namespace). The fallback path — namespaces disabled by
//! `[containment] process = "subreaper"` — must still pass the stop and broker-SIGKILL
//! cases.

mod faults_support;
mod mcp_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use faults_support::{
    Reaper, eventually, marked, read_proc, sigkill, unique_mark, wait_for, workers_of,
};
use mcp_support::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::{BrokerCommand, McpSession, RunAs};

/// `nobody`: the unprivileged user the broker runs as when the tests run as root.
const NOBODY: RunAs = RunAs {
    uid: 65534,
    gid: 65534,
};

/// How long the whole tree may take to be gone after the stop or the kill.
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// The escapes, each ending in a `sleep 1000` that carries the mark in its environment,
/// and a foreground `sleep` that keeps the tool call running.
fn escape_script(mark: &str) -> String {
    [
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
    .join("\n")
}

/// The marked `sleep`s alive now.
fn marked_sleeps(mark: &str) -> Vec<u32> {
    marked(mark)
        .into_iter()
        .filter(|pid| {
            read_proc(*pid).is_some_and(|p| p.argv.first().is_some_and(|a| a.ends_with("sleep")))
        })
        .collect()
}

/// How many marked sleeps hold the workspace's writer slot, and how many do not: the
/// one that closed its descriptors holds none; every other one inherited the child lock
/// *and* the slots.
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
enum Action {
    Stop,
    KillWorker,
    KillBroker,
    KillWorkerAndBroker,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path_ {
    /// The default, as the user running the tests (root in CI: no user namespace).
    Namespace,
    /// The default, as `nobody` when the tests run as root (inside a user namespace).
    NamespaceUnprivileged,
    /// `[containment] process = "subreaper"`.
    Fallback,
}

struct Case {
    env: Env,
    user: Option<RunAs>,
    exe: PathBuf,
    _spare: tempfile::TempDir,
}

impl Case {
    fn new(path: Path_) -> Case {
        let env = Env::new(Vec::new());
        if path == Path_::Fallback {
            let config = std::fs::read_to_string(env.config()).expect("config");
            std::fs::write(
                env.config(),
                format!("{config}\n[containment]\nprocess = \"subreaper\"\n"),
            )
            .expect("config");
        }
        let spare = tempfile::tempdir().expect("spare dir");
        let root = nix::unistd::geteuid().is_root();
        let user = (path == Path_::NamespaceUnprivileged && root).then_some(NOBODY);
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

    fn command(&self, log: &str) -> BrokerCommand {
        let mut cmd = self.env.command(log);
        cmd.exe = self.exe.clone();
        cmd
    }

    async fn broker(&self, log: &str) -> McpSession {
        McpSession::start_as(&self.command(log), self.user)
            .await
            .expect("broker starts")
    }
}

fn chown_tree(path: &Path, user: RunAs) {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read dir").flatten() {
            chown_tree(&entry.path(), user);
        }
    }
}

/// The `subzero` binary, or a copy of it other users can run.
fn binary_for_others(spare: &Path) -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_subzero"));
    let open = exe
        .ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.mode() & 0o001 != 0));
    if open {
        return exe;
    }
    let copy = spare.join("subzero");
    std::fs::copy(&exe, &copy).expect("copy subzero");
    std::fs::set_permissions(spare, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod exe");
    copy
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
async fn process_receipt(s: &McpSession, child: &str) -> Value {
    let snap = ok(s, "subzero_get", json!({"childId": child})).await;
    snap["containment"]["process"].clone()
}

fn expected_mode(path: Path_) -> &'static str {
    match path {
        Path_::Namespace | Path_::NamespaceUnprivileged => "pid-namespace",
        Path_::Fallback => "subreaper",
    }
}

async fn run_case(path: Path_, action: Action) {
    let case = Case::new(path);
    let env = &case.env;
    let mark = unique_mark(env.dir.path());
    // The first request gets the escapes; the second writer's a text.
    let script = escape_script(&mark);
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
        (found.len() >= 7).then_some(found)
    });
    assert!(
        sleeps.is_some(),
        "the escapes did not all start: {:?}",
        marked_sleeps(&mark)
    );
    let locks = env.state_dir().join("locks");
    let (holding, not_holding) =
        writer_slot_holders_among(&mark, &locks.canonicalize().unwrap_or(locks));
    assert_eq!(
        (holding, not_holding),
        (6, 1),
        "writer slot holders among the escapees"
    );
    let receipt = process_receipt(&s, &child).await;
    assert_eq!(receipt["mode"], expected_mode(path), "{receipt:#}");
    if path == Path_::Fallback {
        assert!(
            receipt["reason"]
                .as_str()
                .is_some_and(|r| r.contains("[containment]")),
            "{receipt:#}"
        );
    }
    let info = ok(&s, "subzero_info", json!({})).await;
    assert_eq!(
        info["enforcement"]["containment"]["process"]["mode"],
        expected_mode(path),
        "{:#}",
        info["enforcement"]
    );
    // The worker: the `subzero worker` process (inside the namespace, under its keeper).
    let worker = workers_of(broker);
    assert_eq!(worker.len(), 1, "one worker: {worker:?}");

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
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn pid_namespace_stop_leaves_nothing_and_admits_no_second_writer_meanwhile() {
    run_case(Path_::Namespace, Action::Stop).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pid_namespace_worker_sigkill_leaves_nothing() {
    run_case(Path_::Namespace, Action::KillWorker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pid_namespace_broker_sigkill_leaves_nothing() {
    run_case(Path_::Namespace, Action::KillBroker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pid_namespace_worker_and_broker_sigkill_together_leave_nothing() {
    run_case(Path_::Namespace, Action::KillWorkerAndBroker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unprivileged_pid_namespace_stop_leaves_nothing() {
    run_case(Path_::NamespaceUnprivileged, Action::Stop).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unprivileged_pid_namespace_worker_sigkill_leaves_nothing() {
    run_case(Path_::NamespaceUnprivileged, Action::KillWorker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unprivileged_pid_namespace_broker_sigkill_leaves_nothing() {
    run_case(Path_::NamespaceUnprivileged, Action::KillBroker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unprivileged_pid_namespace_worker_and_broker_sigkill_together_leave_nothing() {
    run_case(Path_::NamespaceUnprivileged, Action::KillWorkerAndBroker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fallback_stop_leaves_nothing_and_admits_no_second_writer_meanwhile() {
    run_case(Path_::Fallback, Action::Stop).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fallback_broker_sigkill_leaves_nothing() {
    run_case(Path_::Fallback, Action::KillBroker).await;
}

/// A coder's `bash` inside the namespace: its worker is PID 1 with no visible parent,
/// `/proc` shows only the namespace, files it makes belong to the broker's user (the
/// 1:1 map), and git and the C compiler work as before.
async fn tools_work_inside_the_namespace(path: Path_) {
    let case = Case::new(path);
    let env = &case.env;
    let command = [
        "echo \"worker-pid=$PPID\"",
        "echo \"worker-ppid=$(grep '^PPid:' /proc/$PPID/status | tr -dc 0-9)\"",
        "echo \"procs=$(ls -d /proc/[0-9]* | wc -l)\"",
        "touch made-by-bash",
        "git init -q repo && git -C repo -c user.email=t@example.invalid -c user.name=t commit -q --allow-empty -m x && echo git-ok",
        "printf 'int main(void){return 0;}' > t.c && cc t.c -o t.out && ./t.out && echo cc-ok",
    ]
    .join("\n");
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": command}).to_string(),
    ));
    env.server.push(Reply::text("done"));
    let mut reaper = Reaper::new(env.dir.path());
    let s = case.broker("broker").await;
    reaper.broker(s.pid());
    let (child, _) = spawn(&s, env, "coder", "Look around").await;
    let snap = settle(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    let seen = env.server.requests()[1].body.clone();
    for expected in ["worker-pid=1\\n", "worker-ppid=0\\n", "git-ok", "cc-ok"] {
        assert!(seen.contains(expected), "{expected} not in {seen}");
    }
    let procs: usize = seen
        .rsplit("procs=")
        .next()
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .expect("procs= line");
    assert!(procs < 10, "bash sees {procs} processes: {seen}");
    let owner = std::fs::metadata(env.workspace().join("made-by-bash"))
        .expect("bash made its file")
        .uid();
    let broker_uid = case
        .user
        .map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.uid);
    assert_eq!(owner, broker_uid, "the file keeps the broker user's uid");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_work_inside_the_pid_namespace() {
    tools_work_inside_the_namespace(Path_::Namespace).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_work_inside_an_unprivileged_user_and_pid_namespace() {
    tools_work_inside_the_namespace(Path_::NamespaceUnprivileged).await;
}
