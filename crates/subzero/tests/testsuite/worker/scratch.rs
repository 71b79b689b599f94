//! The scratch space that holds raw tool output is private to one worker.
//!
//! The attack: another local user plants `subzero-worker-<pid>` in a shared temp directory (or
//! a `scratch` entry in the state directory) as symlinks, so a child's `bash` output overwrites
//! a file the victim owns, or a broker's cleanup deletes a directory it does not own. The
//! defence: a fresh directory of a random name made by an exclusive `mkdir` (mode 0700,
//! checked to be ours), output files created `O_EXCL|O_NOFOLLOW` with mode 0600, the directory
//! flock-held while its worker lives, removed at teardown, and reclaimed by the next broker
//! when its worker died — without ever following a link.
//!
//! The tests run as root in CI; the attacker is uid 65534 (`nobody`). Without root the planted
//! entries stay owned by the test user and the ownership part of the attack is not shown.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::faults::{
    Reaper, eventually, marked, sigkill, unique_mark, wait_for, workers_of,
};
use crate::support::mcp::{Env, settle, spawn, until};
use crate::support::worker::{ControlLines, RunSpec, coder, snapshot_of, tool_results};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};
use subzero_protocol::{ChildState, RunSettledStatus};
use subzero_testkit::{Reply, ScriptedServer};

/// The attacker's uid and gid.
const NOBODY: u32 = 65534;

/// Prints, for the tool call's captured stdout (fd 1 of the shell): its mode and owner, the
/// mode of its directory, its path, and the user the tool runs as.
const STAT_OUTPUT: &str = "out=$(readlink /proc/$$/fd/1); stat -c '%a %U' \"$out\"; \
     stat -c '%a' \"$(dirname \"$out\")\"; echo \"path=$out\"; echo \"user=$(id -un)\"";

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Hands `path` (not what it points to) to the attacker, when we are root.
fn give_to_attacker(path: &Path) {
    if is_root() {
        lchown(path, Some(NOBODY), Some(NOBODY)).expect("chown to nobody");
    }
}

fn note_when_not_root(test: &str) {
    if !is_root() {
        eprintln!(
            "{test}: not root, so the planted entries stay owned by this user (the other-uid part of the attack is skipped)"
        );
    }
}

fn my_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .expect("passwd lookup")
        .map(|u| u.name)
        .expect("the test user has a name")
}

/// Everything below `dir` (not following links): relative path → (kind, mode, uid, content).
fn tree(dir: &Path) -> BTreeMap<PathBuf, (String, u32, u32, Vec<u8>)> {
    let mut found = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).expect("read_dir").flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            let (kind, content) = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).expect("readlink");
                (
                    "link".to_owned(),
                    target.into_os_string().into_encoded_bytes(),
                )
            } else if meta.is_dir() {
                todo.push(path.clone());
                ("dir".to_owned(), Vec::new())
            } else {
                ("file".to_owned(), std::fs::read(&path).expect("read"))
            };
            let rel = path.strip_prefix(dir).expect("below dir").to_path_buf();
            found.insert(rel, (kind, meta.mode() & 0o7777, meta.uid(), content));
        }
    }
    found
}

/// A victim directory with a file and a subdirectory, and a victim file next to it.
struct Victim {
    dir: PathBuf,
    file: PathBuf,
}

impl Victim {
    fn plant(base: &Path) -> Victim {
        let dir = base.join("victim-dir");
        std::fs::create_dir_all(dir.join("sub")).expect("victim dir");
        std::fs::write(dir.join("keep.txt"), "the victim's notes\n").expect("victim file");
        std::fs::write(dir.join("sub/inner.txt"), "more of the victim's notes\n").expect("inner");
        let file = base.join("victim-file.txt");
        std::fs::write(&file, "the victim's precious file\n").expect("victim file");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        Victim { dir, file }
    }

    fn assert_untouched(&self, snapshot: &Snapshot) {
        assert_eq!(
            std::fs::read_to_string(&self.file).expect("victim file still there"),
            "the victim's precious file\n",
            "the victim file was written through a planted link"
        );
        assert_eq!(
            tree(&self.dir),
            snapshot.0,
            "the victim directory changed through a planted link"
        );
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot(tree(&self.dir))
    }
}

struct Snapshot(BTreeMap<PathBuf, (String, u32, u32, Vec<u8>)>);

/// The `path=` line of a tool result: the file that captured the command's output.
fn captured_path(result: &str) -> PathBuf {
    let line = result
        .lines()
        .find_map(|l| l.strip_prefix("path="))
        .unwrap_or_else(|| panic!("no path= line in the tool result: {result}"));
    PathBuf::from(line)
}

fn assert_private_capture(result: &str) -> PathBuf {
    let user = my_user();
    let lines: Vec<&str> = result.lines().collect();
    assert_eq!(lines.first(), Some(&"exit code: 0"), "{result}");
    assert_eq!(
        lines.get(1).copied(),
        Some(format!("600 {user}").as_str()),
        "the output file must be mode 0600 and ours: {result}"
    );
    assert_eq!(
        lines.get(2).copied(),
        Some("700"),
        "the output directory must be mode 0700: {result}"
    );
    assert!(result.contains(&format!("user={user}")), "{result}");
    captured_path(result)
}

fn assert_fresh_private_dir(dir: &Path) {
    let meta = std::fs::symlink_metadata(dir).expect("lstat the scratch dir");
    assert!(meta.is_dir(), "{} is not a real directory", dir.display());
    assert_eq!(meta.mode() & 0o7777, 0o700, "{}", dir.display());
    assert_eq!(
        meta.uid(),
        nix::unistd::geteuid().as_raw(),
        "{}",
        dir.display()
    );
}

/// A `subzero-worker worker` run directly, with a chosen TMPDIR and command line.
struct DirectWorker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    seen: Vec<Value>,
}

impl DirectWorker {
    fn start(tmpdir: Option<&Path>, args: &[&std::ffi::OsStr]) -> DirectWorker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_subzero-worker"));
        cmd.arg("worker")
            .args(args)
            .env_clear()
            .env("SUBZERO_LOG", "debug")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(tmpdir) = tmpdir {
            cmd.env("TMPDIR", tmpdir);
        }
        let mut child = cmd.spawn().expect("spawn subzero-worker");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    panic!("stdout carried a non-JSON line: {line}");
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        DirectWorker {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to worker");
        stdin.flush().expect("flush");
    }

    fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + support::worker::WAIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(value) => {
                    self.seen.push(value.clone());
                    if pred(&value) {
                        return value;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("timed out waiting for {what}; lines: {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "the worker closed stdout before {what} (see its stderr above); lines: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Closes stdin and waits for the exit status.
    fn close(mut self) -> std::process::ExitStatus {
        self.stdin.take();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        panic!("the worker did not exit within 10 s of stdin EOF");
    }
}

impl ControlLines for DirectWorker {
    fn next_line(&mut self, what: &str, pred: &dyn Fn(&Value) -> bool) -> Value {
        self.expect(what, pred)
    }

    fn lines(&self) -> &[Value] {
        &self.seen
    }
}

impl Drop for DirectWorker {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one coder run whose only tool call is `bash` with `command`; returns the tool result.
fn run_bash(worker: &mut DirectWorker, workspace: &Path, command: &str) -> String {
    let run_id = "run_00000000000000005343524154";
    let args = json!({ "command": command }).to_string();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("c1", "bash", &args),
        Reply::text("done"),
    ])
    .expect("scripted model");
    let transcript = workspace.with_extension("jsonl");
    let spec = RunSpec::new(run_id, server.base_url(), coder(), workspace, &transcript);
    worker.send(&spec.message());
    let settled = worker.run_settled(run_id);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one tool round");
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:#?}");
    results[0].clone()
}

fn workspace_in(base: &Path) -> PathBuf {
    let ws = base.join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    ws.canonicalize().expect("canonical workspace")
}

/// Whether another open of `dir` can take its flock right now.
fn lock_is_free(dir: &Path) -> bool {
    let file = std::fs::File::open(dir).expect("open the directory");
    Flock::lock(file, FlockArg::LockExclusiveNonblock).is_ok()
}

#[test]
fn bash_output_is_captured_in_a_private_file_of_a_fresh_directory() {
    let base = tempfile::tempdir().expect("tempdir");
    let workspace = workspace_in(base.path());
    // No TMPDIR: the worker's fallback under the system temp directory, as doctor runs it.
    let mut worker = DirectWorker::start(None, &[]);
    worker.hello_line();
    let result = run_bash(&mut worker, &workspace, STAT_OUTPUT);
    let path = assert_private_capture(&result);
    let dir = path.parent().expect("the output file has a directory");
    assert_ne!(
        dir,
        std::env::temp_dir().join(format!("subzero-worker-{}", worker.pid())),
        "the scratch directory has a predictable name"
    );
    assert!(
        !dir.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(&worker.pid().to_string())),
        "the scratch directory is named after the pid: {}",
        dir.display()
    );
    assert_fresh_private_dir(dir);
    assert!(!path.exists(), "the output file outlived its tool call");
    assert!(
        !lock_is_free(dir),
        "a live worker holds the flock of its scratch directory"
    );
    assert!(worker.close().success());
    assert!(!dir.exists(), "the scratch directory outlived the worker");
}

#[test]
fn planted_temp_entries_are_never_used_by_a_direct_worker() {
    note_when_not_root("planted_temp_entries_are_never_used_by_a_direct_worker");
    let base = tempfile::tempdir().expect("tempdir");
    let workspace = workspace_in(base.path());
    let victim = Victim::plant(base.path());
    let before = victim.snapshot();
    // A shared temp directory the attacker can write to.
    let tmp = base.path().join("shared-tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o777)).expect("chmod");

    let mut worker = DirectWorker::start(Some(&tmp), &[]);
    worker.hello_line();
    // The attacker learns the pid and plants the names a worker used to pick, plus lookalikes.
    let pid = worker.pid();
    let mut planted_names = vec![format!("subzero-worker-{pid}")];
    let planted = tmp.join(&planted_names[0]);
    std::fs::create_dir(&planted).expect("planted dir");
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    give_to_attacker(&planted);
    for n in 0..4 {
        let link = planted.join(format!("bash-{n}.out"));
        symlink(&victim.file, &link).expect("planted link");
        give_to_attacker(&link);
    }
    for n in 1..4 {
        planted_names.push(format!("subzero-worker-{}", pid + n));
        let link = tmp.join(planted_names.last().expect("a name"));
        symlink(&victim.dir, &link).expect("planted dir link");
        give_to_attacker(&link);
    }

    let command = format!("echo hello-from-bash; {STAT_OUTPUT}");
    let result = run_bash(&mut worker, &workspace, &command);
    assert!(result.contains("hello-from-bash"), "{result}");
    victim.assert_untouched(&before);
    let path = assert_private_capture(&result.replacen("hello-from-bash\n", "", 1));
    let dir = path.parent().expect("the output file has a directory");
    assert_eq!(dir.parent(), Some(tmp.as_path()), "{}", dir.display());
    let own = dir
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        !planted_names.contains(&own),
        "the worker used a planted entry: {}",
        dir.display()
    );
    assert_fresh_private_dir(dir);
    let mut entries: Vec<String> = std::fs::read_dir(&tmp)
        .expect("read tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| *n != own)
        .collect();
    entries.sort();
    planted_names.sort();
    assert_eq!(entries, planted_names, "only the planted entries and ours");
    let planted_tree = tree(&planted);
    assert_eq!(
        planted_tree.len(),
        4,
        "nothing was added to the planted directory: {planted_tree:#?}"
    );
    assert!(
        planted_tree.values().all(|(kind, ..)| kind == "link"),
        "{planted_tree:#?}"
    );

    assert!(worker.close().success());
    victim.assert_untouched(&before);
    assert!(!dir.exists(), "teardown left the worker's directory");
    assert_eq!(
        tree(&planted),
        planted_tree,
        "teardown touched a planted entry"
    );
    for name in &planted_names[1..] {
        let meta = std::fs::symlink_metadata(tmp.join(name)).expect("planted link kept");
        assert!(meta.file_type().is_symlink(), "{name}");
    }
}

#[test]
fn the_scratch_directory_is_removed_on_a_normal_teardown() {
    let base = tempfile::tempdir().expect("tempdir");
    let workspace = workspace_in(base.path());
    let parent = base.path().join("scratch-parent");
    std::fs::create_dir(&parent).expect("parent");
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let tmp = base.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");

    let mut worker = DirectWorker::start(
        Some(&tmp),
        &["--scratch-parent".as_ref(), parent.as_os_str()],
    );
    worker.hello_line();
    let result = run_bash(&mut worker, &workspace, STAT_OUTPUT);
    let path = assert_private_capture(&result);
    let dir = path.parent().expect("the output file has a directory");
    assert_eq!(dir.parent(), Some(parent.as_path()), "{}", dir.display());
    assert_fresh_private_dir(dir);
    assert!(!lock_is_free(dir), "the live worker holds its flock");
    assert_eq!(
        tree(&tmp),
        BTreeMap::new(),
        "with a parent, TMPDIR is unused"
    );

    assert!(worker.close().success());
    assert!(
        !dir.exists(),
        "the scratch directory outlived a normal teardown"
    );
    assert_eq!(tree(&parent), BTreeMap::new(), "the parent is left empty");
}

/// The tool result of the first bash call a broker's child made (the second model request).
fn broker_bash_result(env: &Env) -> String {
    let requests = env.server.requests();
    assert!(requests.len() >= 2, "the model saw no tool result");
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:#?}");
    results[0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_scratch_link_in_the_state_directory_is_replaced_not_followed() {
    note_when_not_root("a_planted_scratch_link_in_the_state_directory_is_replaced_not_followed");
    let env = Env::new(Vec::new());
    let victim = Victim::plant(env.dir.path());
    let before = victim.snapshot();
    let state = env.state_dir();
    std::fs::create_dir(&state).expect("state dir");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let planted = state.join("scratch");
    symlink(&victim.dir, &planted).expect("planted scratch link");
    give_to_attacker(&planted);

    let command = format!("echo from-broker-bash; {STAT_OUTPUT}");
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({ "command": command }).to_string(),
    ));
    env.server.push(Reply::text("done"));
    let s = env.broker("broker").await;
    let (child, _run) = spawn(&s, &env, "coder", "Run the command").await;
    let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
    assert_eq!(snap.state, ChildState::Ready, "{snap:#}");

    let result = broker_bash_result(&env);
    assert!(result.contains("from-broker-bash"), "{result}");
    victim.assert_untouched(&before);
    let path = assert_private_capture(&result.replacen("from-broker-bash\n", "", 1));
    let dir = path.parent().expect("the output file has a directory");
    let scratch = state.canonicalize().expect("state").join("scratch");
    assert_eq!(
        dir.parent(),
        Some(scratch.as_path()),
        "a broker's worker keeps its output under the state directory's scratch/"
    );
    // The worker may already have exited: its directory was checked from inside the tool call.
    assert_fresh_private_dir(&scratch);

    s.close().await.expect("close");
    assert!(
        support::mcp::wait_no_workers(&env.workspace(), Duration::from_secs(10)),
        "workers outlived their broker"
    );
    assert!(
        eventually(Duration::from_secs(5), || tree(&scratch).is_empty()),
        "scratch/ still holds {:?} after every worker exited",
        tree(&scratch).keys().collect::<Vec<_>>()
    );
    victim.assert_untouched(&before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_workers_scratch_is_reclaimed_by_the_next_broker_and_a_live_ones_is_kept() {
    note_when_not_root(
        "a_killed_workers_scratch_is_reclaimed_by_the_next_broker_and_a_live_ones_is_kept",
    );
    let env = Env::new(Vec::new());
    let victim = Victim::plant(env.dir.path());
    let before = victim.snapshot();
    let mark = unique_mark(env.dir.path());
    let note = env.workspace().join(".scratch-path");
    let command = format!(
        "export {mark}; readlink /proc/$$/fd/1 > {}; sleep 1000",
        note.display()
    );
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({ "command": command }).to_string(),
    ));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let first = env.broker("broker1").await;
    let broker1 = reaper.broker(first.pid());
    let (child, _run) = spawn(&first, &env, "coder", "Run the long job").await;
    let captured = wait_for(Duration::from_secs(20), || {
        std::fs::read_to_string(&note)
            .ok()
            .filter(|s| s.ends_with('\n'))
    })
    .expect("the bash tool reported its output file");
    let live = PathBuf::from(captured.trim())
        .parent()
        .expect("the output file has a directory")
        .to_path_buf();
    let scratch = env
        .state_dir()
        .canonicalize()
        .expect("state")
        .join("scratch");
    assert_eq!(live.parent(), Some(scratch.as_path()), "{}", live.display());

    // Stale leftovers a dead worker (or an attacker) might leave: links, a foreign directory
    // holding a link to the victim file, a plain file.
    let link = scratch.join("subzero-worker-planted-link");
    symlink(&victim.dir, &link).expect("planted link");
    give_to_attacker(&link);
    let foreign = scratch.join("subzero-worker-planted-dir");
    std::fs::create_dir(&foreign).expect("planted dir");
    symlink(&victim.file, foreign.join("bash-0.out")).expect("planted inner link");
    give_to_attacker(&foreign.join("bash-0.out"));
    give_to_attacker(&foreign);
    std::fs::write(scratch.join("stray-file"), "left over").expect("stray file");

    // A second broker starting meanwhile keeps the live worker's directory; its start (done
    // by the time it answers its first call) reclaimed the rest.
    let second = env.broker("broker2").await;
    reaper.broker(second.pid());
    support::mcp::ok(&second, "subzero_info", json!({})).await;
    assert!(live.is_dir(), "a live worker's scratch was removed");
    assert!(!lock_is_free(&live), "the live worker holds its flock");
    let left: Vec<PathBuf> = tree(&scratch)
        .into_keys()
        .filter(|p| p.components().count() == 1)
        .collect();
    assert_eq!(
        left,
        vec![PathBuf::from(live.file_name().expect("name"))],
        "stale entries survived a broker start"
    );
    victim.assert_untouched(&before);
    second.close().await.expect("close");

    let worker = workers_of(broker1);
    assert_eq!(
        worker.len(),
        1,
        "one worker under the first broker: {worker:?}"
    );
    sigkill(worker[0]);
    let snap = snapshot_of(
        &until(&first, &child, Duration::from_secs(15), |v| {
            snapshot_of(v).state != ChildState::Running
        })
        .await,
    );
    assert_eq!(snap.state, ChildState::Interrupted, "{snap:#}");
    assert!(
        eventually(Duration::from_secs(5), || marked(&mark).is_empty()),
        "the bash tool outlived its worker"
    );
    assert!(
        live.is_dir(),
        "a SIGKILLed worker cannot clean up: its scratch is left for the next broker"
    );

    let third = env.broker("broker3").await;
    reaper.broker(third.pid());
    support::mcp::ok(&third, "subzero_info", json!({})).await;
    assert!(
        !live.exists(),
        "the dead worker's scratch {} survived the next broker start",
        live.display()
    );
    assert_eq!(tree(&scratch), BTreeMap::new(), "scratch/ is empty again");
    victim.assert_untouched(&before);
    third.close().await.expect("close");
    first.close().await.expect("close");
}
