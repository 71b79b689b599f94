//! Kernel-enforced process containment: a coder's `bash` starts six escapees — setsid +
//! nohup, a double fork, `disown`, `trap '' TERM`, a new session that closes every
//! descriptor (so it holds none of the locks), a plain background job — and then the
//! run is stopped, the worker SIGKILLed, the broker SIGKILLed, or worker and broker
//! SIGKILLed together. Whatever happened, nothing of the tree is left within a second,
//! and no second write-capable run is admitted to the workspace while any of it lives
//! (the cases are in `support::containment`; the cgroup path is `containment/cgroup.rs`).
//!
//! On the namespace path (the default) every worker is init of its own PID namespace, so
//! the kernel ends the tree; it is tried as root (no user namespace) and, as CI runs as
//! root, as `nobody` (inside a user namespace). The fallback path — namespaces disabled by
//! `[containment] process = "subreaper"` — must still pass the stop and broker-SIGKILL
//! cases.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use crate::support::containment::{Action, Case, Path_, run_case};
use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

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
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
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
