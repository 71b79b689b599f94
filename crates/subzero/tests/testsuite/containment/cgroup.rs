//! The cgroup v2 path of process containment, forced by `[containment] process =
//! "cgroup"` (what `auto` falls back to where the kernel refuses PID namespaces): every
//! escape of `support::containment` × stop, worker SIGKILL, broker SIGKILL, and worker and
//! broker SIGKILL together leaves nothing within a second, admits no second writer while
//! any of the tree lives, and leaves no cgroup behind; a broker that starts kills and
//! removes the cgroups of brokers that are gone (the case where worker, broker and the
//! worker's lock holder all died at once) and keeps those of live ones; a forced cgroup that cannot be had
//! refuses the start with the reason.
//!
//! These need a cgroup v2 hierarchy with a subtree the test user can write (CI runs as
//! root on such a machine); without one they print why and pass.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support;
use crate::support::containment::{
    Action, Case, GONE_WITHIN, NOBODY, Path_, cgroup_dir_of, marked_sleeps, own_cgroup, run_case,
};
use crate::support::faults::{
    Reaper, alive, eventually, marked, read_proc, sigkill, unique_mark, wait_for, workers_of,
};
use crate::support::mcp::{Env, spawn};
use serde_json::json;
use subzero_testkit::Reply;

/// The writable cgroup v2 directory of this test, or `None` after printing why there is
/// none (the test then passes without running).
fn writable_cgroup(test: &str) -> Option<PathBuf> {
    match own_cgroup() {
        Ok(dir) => Some(dir),
        Err(why) => {
            eprintln!("skipping {test}: no writable cgroup v2 on this machine: {why}");
            None
        }
    }
}

async fn cgroup_case(test: &str, action: Action) {
    if writable_cgroup(test).is_some() {
        run_case(Path_::Cgroup, action).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cgroup_stop_leaves_nothing_and_admits_no_second_writer_meanwhile() {
    cgroup_case("cgroup_stop", Action::Stop).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cgroup_worker_sigkill_leaves_nothing() {
    cgroup_case("cgroup_worker_sigkill", Action::KillWorker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cgroup_broker_sigkill_leaves_nothing() {
    cgroup_case("cgroup_broker_sigkill", Action::KillBroker).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cgroup_worker_and_broker_sigkill_together_leave_nothing() {
    cgroup_case(
        "cgroup_worker_and_broker_sigkill",
        Action::KillWorkerAndBroker,
    )
    .await;
}

/// Without Landlock (`filesystem = "off"`) a tool process may move itself out of its
/// cgroup into the broker's, which the user can write; when the worker dies it is an
/// orphan re-parented to the (subreaper) broker, which SIGKILLs it with the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_that_moved_out_of_its_cgroup_still_dies_with_its_worker() {
    let Some(own) = writable_cgroup("a tool that leaves its cgroup") else {
        return;
    };
    let env = Env::new(Vec::new());
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!("{config}\n[containment]\nprocess = \"cgroup\"\nfilesystem = \"off\"\n"),
    )
    .expect("config");
    let mark = unique_mark(env.dir.path());
    let script = format!(
        "export {mark}\nsetsid bash -c 'echo $$ > {}/cgroup.procs; exec sleep 1000' &\nsleep 1000",
        own.display()
    );
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": script}).to_string(),
    ));
    let case = Case::with_user(env, None);
    let env = &case.env;
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let s = case.broker("broker").await;
    let broker = reaper.broker(s.pid());
    spawn(&s, env, "coder", "Leave the cgroup").await;
    let moved = wait_for(Duration::from_secs(20), || {
        let sleeps = marked_sleeps(&mark);
        let out = sleeps
            .iter()
            .copied()
            .find(|pid| cgroup_dir_of(*pid).is_some_and(|dir| dir == own));
        (sleeps.len() == 2).then_some(out).flatten()
    });
    assert!(
        moved.is_some(),
        "no tool process left its cgroup: {:?}",
        marked_sleeps(&mark)
    );
    let worker = workers_of(broker);
    assert_eq!(worker.len(), 1, "one worker: {worker:?}");
    sigkill(worker[0]);
    assert!(
        eventually(GONE_WITHIN, || marked(&mark).is_empty()),
        "left after the worker died: {:?}",
        marked(&mark)
    );
    s.close().await.expect("close");
}

/// `<pid>-<start time>` of a process, as the broker names the cgroups it owns.
fn owner_of(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let start = stat[stat.rfind(')').expect("comm") + 1..]
        .split_whitespace()
        .nth(19)
        .expect("start time")
        .to_owned();
    format!("{pid}-{start}")
}

/// A `sleep` moved into `<dir>/tools`, as a tool process of a worker cgroup would be.
/// A broker of another test that starts meanwhile may sweep the still empty cgroup of a
/// gone owner away: then it is made again.
fn sleeper_in(dir: &Path) -> std::process::Child {
    let mut sleep = Command::new("sleep")
        .arg("1000")
        .stdin(Stdio::null())
        .spawn()
        .expect("sleep");
    for _ in 0..100 {
        let _ = std::fs::create_dir_all(dir.join("tools"));
        match std::fs::write(dir.join("tools/cgroup.procs"), sleep.id().to_string()) {
            Ok(()) => return sleep,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                let _ = sleep.kill();
                panic!("move the sleep into {}: {e}", dir.display());
            }
        }
    }
    let _ = sleep.kill();
    panic!("{} kept vanishing", dir.display());
}

/// Kills and removes a cgroup the test made.
fn clean_up(dir: &Path) {
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    eventually(Duration::from_secs(1), || {
        let _ = std::fs::remove_dir(dir.join("tools"));
        std::fs::remove_dir(dir).is_ok() || !dir.exists()
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_starting_broker_ends_the_cgroups_of_gone_brokers_and_keeps_live_ones() {
    let Some(own) = writable_cgroup("the start-up sweep") else {
        return;
    };
    // A broker that is gone: a process that lived, named with its real start time.
    let mut gone = Command::new("sleep").arg("1000").spawn().expect("sleep");
    let gone_owner = owner_of(gone.id());
    gone.kill().expect("kill");
    gone.wait().expect("reap");
    let orphaned = own.join(format!("subzero-{gone_owner}-1"));
    let mut orphan = sleeper_in(&orphaned);
    // A broker that lives: this test process.
    let kept = own.join(format!("subzero-{}-1", owner_of(std::process::id())));
    let mut survivor = sleeper_in(&kept);

    let case = Case::new(Path_::Cgroup);
    let s = case.broker("broker").await;
    // The sweep runs before the broker answers `initialize`.
    let orphan_pid = orphan.id();
    let ended = eventually(Duration::from_secs(1), || {
        let _ = orphan.try_wait();
        !alive(orphan_pid)
    });
    let orphan_left = read_proc(orphan_pid);
    if !ended {
        let _ = orphan.kill();
    }
    assert!(
        ended,
        "the process in a gone broker's cgroup survived: {orphan_left:?}"
    );
    assert!(
        eventually(Duration::from_secs(1), || !orphaned.exists()),
        "the gone broker's cgroup {} was not removed",
        orphaned.display()
    );
    assert!(
        alive(survivor.id()) && kept.exists(),
        "a live broker's cgroup was touched"
    );
    s.close().await.expect("close");
    clean_up(&kept);
    let _ = survivor.wait();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_removes_its_worker_cgroups_when_it_closes() {
    let Some(own) = writable_cgroup("cgroup removal") else {
        return;
    };
    let case = Case::new(Path_::Cgroup);
    let s = case.broker("broker").await;
    let broker = s.pid().expect("broker pid");
    // `info` starts the handshake worker, in a cgroup of its own.
    support::mcp::ok(&s, "subzero_info", serde_json::json!({})).await;
    s.close().await.expect("close");
    let prefix = format!("subzero-{broker}-");
    let left = || -> Vec<String> {
        std::fs::read_dir(&own)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.starts_with(&prefix))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        eventually(Duration::from_secs(2), || left().is_empty()),
        "cgroups left after the broker closed: {:?}",
        left()
    );
}

#[test]
fn a_forced_cgroup_that_cannot_be_had_refuses_the_start_with_the_reason() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: needs root to run the broker as nobody, who has no cgroup subtree");
        return;
    }
    let env = Env::new(Vec::new());
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!("{config}\n[containment]\nprocess = \"cgroup\"\n"),
    )
    .expect("config");
    // As nobody, the test's (root-owned) cgroup is not writable.
    let case = Case::with_user(env, Some(NOBODY));
    let cmd = case.command("refused");
    let out = std::process::Command::new(&cmd.exe)
        .arg("mcp")
        .arg("--workspace")
        .arg(&cmd.workspace)
        .arg("--state-dir")
        .arg(&cmd.state_dir)
        .arg("--config")
        .arg(&cmd.config)
        .uid(NOBODY.uid)
        .gid(NOBODY.gid)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("subzero mcp runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("[containment] process = \"cgroup\"")
            && stderr.contains("cgroup")
            && stderr.contains("process = \"auto\""),
        "{stderr}"
    );
}
