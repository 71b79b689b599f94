//! Ownership and workspace caps proven by the kernel, across real OS processes.
//!
//! The test binary re-executes itself as a helper (`helper_process` with
//! `SUBZERO_TEST_ROLE` set); helpers print `@@ …` lines the parent waits for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use crate::testsuite::common::{TOKEN, spawn_input};
use subzero_core::{ChildId, ChildState, ErrorCode, RunId, RunStatus};
use subzero_runtime::locks::{
    BrokerIdentity, ChildLock, SlotKind, holders, is_free, try_take_slot,
};
use subzero_runtime::paths::StatePaths;
use subzero_runtime::recovery::recover_at_startup;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{
    Admit, AdmitFollowup, AdmitSpawn, Ownership, Phase, Settlement, Store, StoreOptions,
};

const ROLE: &str = "SUBZERO_TEST_ROLE";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn env_path(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os(name).unwrap())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "@@ {line}").unwrap();
    out.flush().unwrap();
}

fn slot_kind() -> SlotKind {
    match std::env::var("KIND").unwrap().as_str() {
        "writer" => SlotKind::Writer,
        _ => SlotKind::Worker,
    }
}

/// Entry point of helper processes; a no-op when run as an ordinary test.
#[test]
fn helper_process() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let paths = StatePaths::create(env_path("STATE")).unwrap();
    let scope = WorkspaceScope::resolve(&env_path("WORKSPACE")).unwrap();
    match role.as_str() {
        "claim" => {
            let child: ChildId = std::env::var("CHILD").unwrap().parse().unwrap();
            let go = env_path("GO");
            say("ready");
            let deadline = Instant::now() + Duration::from_secs(20);
            while !go.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let store = Store::open(&paths.database(), StoreOptions::default()).unwrap();
            let token = format!("bk_HELPER{}", std::process::id());
            match ChildLock::try_acquire(&paths, child) {
                Err(e) => say(e.code().as_str()),
                Ok(lock) => {
                    match rt().block_on(store.claim(&scope, child, &token)) {
                        Ok(claim) => say(&format!("owner {}", claim.owner_generation)),
                        Err(e) => say(e.code().as_str()),
                    }
                    // The others try while it is held: it is held until the test ends us.
                    hold_until_killed(lock);
                }
            }
        }
        "hold_slots" => {
            let count: u32 = std::env::var("COUNT").unwrap().parse().unwrap();
            let cap: u32 = std::env::var("CAP").unwrap().parse().unwrap();
            let held: Vec<_> = (0..count)
                .map(|_| try_take_slot(&paths, &scope, slot_kind(), cap).unwrap())
                .collect();
            say(&format!("held {}", held.len()));
            hold_until_killed(held);
        }
        "try_slot" => {
            let cap: u32 = std::env::var("CAP").unwrap().parse().unwrap();
            match try_take_slot(&paths, &scope, slot_kind(), cap) {
                Ok(_) => say("ok"),
                Err(e) => say(e.code().as_str()),
            }
        }
        "worker_owner" => {
            // A broker that claims a child and hands the child lock to a "worker"
            // (here `sleep`), which keeps it held after the broker dies.
            let child: ChildId = std::env::var("CHILD").unwrap().parse().unwrap();
            let identity = BrokerIdentity::acquire(&paths).unwrap();
            let store = Store::open(&paths.database(), StoreOptions::default()).unwrap();
            let lock = ChildLock::try_acquire(&paths, child).unwrap();
            let mut input: AdmitSpawn = spawn_input(&scope, identity.token());
            input.child.child_id = child;
            let rt = rt();
            rt.block_on(store.admit_spawn(input)).unwrap();
            rt.block_on(store.admit_followup(
                &scope,
                AdmitFollowup {
                    child_id: child,
                    run_id: RunId::generate(),
                    prompt: "queued".to_owned(),
                    owner_token: identity.token().to_owned(),
                    receipt: None,
                },
            ))
            .unwrap();
            // A stand-in for the spawner's dup2: let `sleep` inherit the lock.
            let fd = lock.into_fd();
            rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty()).unwrap();
            // Deliberately never waited for: it must outlive this "broker".
            #[allow(clippy::zombie_processes)]
            let worker = Command::new("sleep")
                .arg("120")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            drop(fd);
            say(&format!("ready {} {}", worker.id(), identity.token()));
            hold_until_killed(());
        }
        other => panic!("unknown role {other}"),
    }
    std::process::exit(0);
}

/// Keeps `held` (a lock, slots) until the test kills this helper (dropping its `Helper`).
fn hold_until_killed<T>(held: T) -> ! {
    let _held = held;
    loop {
        std::thread::park();
    }
}

struct Helper {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Helper {
    fn spawn(role: &str, state: &Path, workspace: &Path, env: &[(&str, String)]) -> Helper {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "testsuite::cross_process::helper_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env("STATE", state)
        .env("WORKSPACE", workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Helper { child, out }
    }

    /// The next `@@` line (without the marker).
    fn said(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "helper exited without reporting");
            // The harness may print `test helper_process ... ` on the same line.
            if let Some(at) = line.find("@@ ") {
                return line[at + 3..].trim_end().to_owned();
            }
        }
    }

    /// SIGKILL and reap: when this returns, the kernel has closed every descriptor.
    fn sigkill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Shared {
    _dir: tempfile::TempDir,
    state: PathBuf,
    workspace: PathBuf,
    paths: StatePaths,
    scope: WorkspaceScope,
}

fn shared() -> Shared {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let paths = StatePaths::create(&state).unwrap();
    let scope = WorkspaceScope::resolve(&workspace).unwrap();
    Shared {
        _dir: dir,
        state,
        workspace,
        paths,
        scope,
    }
}

#[test]
fn concurrent_claims_of_one_child_from_three_processes_yield_exactly_one_owner() {
    let sh = shared();
    let store = Store::open(&sh.paths.database(), StoreOptions::default()).unwrap();
    let rt = rt();
    let input = spawn_input(&sh.scope, TOKEN);
    let (child, run) = (input.child.child_id, input.run_id);
    assert!(matches!(
        rt.block_on(store.admit_spawn(input)).unwrap(),
        Admit::New(_)
    ));
    rt.block_on(store.settle_run(
        child,
        run,
        TOKEN,
        Settlement::Failed {
            code: ErrorCode::ModelRequestFailed,
            message: "x".to_owned(),
            partial: None,
            details: None,
        },
    ))
    .unwrap();

    let go = sh.state.join("go");
    let env = [
        ("CHILD", child.to_string()),
        ("GO", go.display().to_string()),
    ];
    let mut helpers: Vec<Helper> = (0..3)
        .map(|_| Helper::spawn("claim", &sh.state, &sh.workspace, &env))
        .collect();
    // Each is waiting for the go file: they race for the lock together.
    for helper in &mut helpers {
        assert_eq!(helper.said(), "ready");
    }
    std::fs::write(&go, b"go").unwrap();
    let mut results: Vec<String> = helpers.iter_mut().map(Helper::said).collect();
    results.sort();
    assert_eq!(results, vec!["busy", "busy", "owner 2"]);
    let row = rt.block_on(store.child(&sh.scope, child)).unwrap();
    assert_eq!(row.owner_generation, 2);
    assert_eq!(row.ownership, Ownership::Owned);
}

#[test]
fn a_fifth_worker_is_workspace_busy_and_sigkill_frees_a_slot_at_once() {
    let sh = shared();
    let kind = [("KIND", "worker".to_owned()), ("CAP", "4".to_owned())];
    let mut env = kind.to_vec();
    env.push(("COUNT", "4".to_owned()));
    let mut holder = Helper::spawn("hold_slots", &sh.state, &sh.workspace, &env);
    assert_eq!(holder.said(), "held 4");

    let mut other = Helper::spawn("try_slot", &sh.state, &sh.workspace, &kind);
    assert_eq!(other.said(), "workspace_busy");
    let err = try_take_slot(&sh.paths, &sh.scope, SlotKind::Worker, 4).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WorkspaceBusy);
    assert!(err.to_string().contains("4 active workers"), "{err}");

    holder.sigkill();
    let freed: Vec<_> = (0..4)
        .map(|_| try_take_slot(&sh.paths, &sh.scope, SlotKind::Worker, 4).unwrap())
        .collect();
    assert_eq!(freed.len(), 4);
}

#[test]
fn a_second_writer_is_workspace_busy_and_sigkill_frees_it_at_once() {
    let sh = shared();
    let env = [
        ("KIND", "writer".to_owned()),
        ("CAP", "1".to_owned()),
        ("COUNT", "1".to_owned()),
    ];
    let mut holder = Helper::spawn("hold_slots", &sh.state, &sh.workspace, &env);
    assert_eq!(holder.said(), "held 1");
    let err = try_take_slot(&sh.paths, &sh.scope, SlotKind::Writer, 1).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WorkspaceBusy);
    // Another workspace is unaffected.
    let elsewhere = sh.workspace.parent().unwrap().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let other_scope = WorkspaceScope::resolve(&elsewhere).unwrap();
    assert!(try_take_slot(&sh.paths, &other_scope, SlotKind::Writer, 1).is_ok());

    holder.sigkill();
    assert!(try_take_slot(&sh.paths, &sh.scope, SlotKind::Writer, 1).is_ok());
}

fn wait_until_free(path: &Path) {
    // The `sleep` grandchild is not ours to reap; its descriptors close when it dies.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !is_free(path).unwrap() {
        assert!(Instant::now() < deadline, "lock never freed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_inherited_child_lock_outlives_its_broker_and_recovery_waits_for_it() {
    let sh = shared();
    let child = ChildId::generate();
    let store = Store::open(&sh.paths.database(), StoreOptions::default()).unwrap();
    let me = BrokerIdentity::acquire(&sh.paths).unwrap();
    let rt = rt();

    let mut broker = Helper::spawn(
        "worker_owner",
        &sh.state,
        &sh.workspace,
        &[("CHILD", child.to_string())],
    );
    let ready = broker.said();
    let mut parts = ready.split_whitespace().skip(1);
    let worker_pid: u32 = parts.next().unwrap().parse().unwrap();

    // Its broker is alive: recovery leaves the child alone.
    let report = recover_at_startup(&store, &sh.paths, me.token()).unwrap();
    assert_eq!(report.live_owner, vec![child]);

    // The broker dies; its worker still holds the child lock.
    broker.sigkill();
    let lock_path = sh.paths.child_lock(child);
    assert!(!is_free(&lock_path).unwrap());
    assert!(holders(&lock_path).iter().any(|h| h.pid == worker_pid));
    let err = ChildLock::try_acquire(&sh.paths, child).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy);
    assert!(
        err.to_string().contains(&format!("pid {worker_pid}")),
        "{err}"
    );

    let report = recover_at_startup(&store, &sh.paths, me.token()).unwrap();
    assert_eq!(report.recovery_required.len(), 1);
    assert!(
        report.recovery_required[0]
            .1
            .iter()
            .any(|h| h.pid == worker_pid)
    );
    let row = rt.block_on(store.child(&sh.scope, child)).unwrap();
    assert_eq!(row.ownership, Ownership::RecoveryRequired);
    assert_eq!(row.phase, Phase::RecoveryRequired);
    assert_eq!(row.state, ChildState::Running);
    let err = rt
        .block_on(store.claim(&sh.scope, child, me.token()))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::RecoveryRequired);

    // The last holder dies: the next pass interrupts the run and cancels the queue.
    let status = Command::new("kill")
        .args(["-KILL", &worker_pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_until_free(&lock_path);
    let report = recover_at_startup(&store, &sh.paths, me.token()).unwrap();
    assert_eq!(report.interrupted, vec![child]);
    let row = rt.block_on(store.child(&sh.scope, child)).unwrap();
    assert_eq!(row.state, ChildState::Interrupted);
    assert_eq!(row.ownership, Ownership::None);
    assert!(row.interrupt_reason.unwrap().contains("exited"));
    let runs = rt.block_on(store.runs(&sh.scope, child)).unwrap();
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert!(
        runs[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("nothing was retried")
    );
    assert_eq!(runs[1].status, RunStatus::Interrupted);

    // Now a broker can take the lock and claim it.
    let _lock = ChildLock::try_acquire(&sh.paths, child).unwrap();
    let claim = rt
        .block_on(store.claim(&sh.scope, child, me.token()))
        .unwrap();
    assert_eq!(claim.state, ChildState::Interrupted);
}
