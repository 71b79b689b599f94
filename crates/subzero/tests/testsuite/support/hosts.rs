//! A real host (Claude Code, Codex) from `tests/hosts/<host>/node_modules`, set up with
//! `subzero hosts install` and run headless against a scripted parent model on loopback;
//! its children run against the Chat Completions `ScriptedServer`.
//!
//! Everything a host run touches lives in one temporary directory: `home/` (HOME), the
//! workspace, the state directory and the Subzero config. Outside origins go to a proxy on
//! loopback that refuses at once, so a host that tries one fails fast instead of hanging.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::parent::{Act, Exchange, ParentServer};
use subzero_testkit::{Reply, ScriptedServer};
use tempfile::TempDir;

use crate::support::faults::{Reaper, eventually, marked, running_in, unique_mark};
pub use crate::support::real_host::{CRED, TOOLS, processes_naming};
use crate::support::real_host::{
    credential_config, host_project, installed, isolated_command, output_within,
    write_demo_workspace,
};

/// The key the children's scripted model is called with.
pub const KEY: &str = "sk-subzero-host-test-5b1e0c";
/// The variable the Subzero config reads that key from (`[credentials.scripted] env = …`).
pub const KEY_VAR: &str = "SUBZERO_HOST_TEST_KEY";

/// The host's executable from its npm project (`tests/hosts/<dir>`), or `None` after saying
/// loudly why the test is skipped. In strict mode (`cargo xtask test`, CI) a missing host
/// fails the test.
pub fn host_binary(dir: &str, name: &str) -> Option<PathBuf> {
    let project = host_project(dir);
    let how = format!(
        "(cd {} && npm ci --prefer-offline --no-audit --no-fund)",
        project.display()
    );
    installed(dir, project.join("node_modules/.bin").join(name), &how)
}

/// A loopback port that refuses every connection at once (nothing listens there): the
/// proxy for every origin that is not loopback.
pub struct Refuser {
    port: u16,
}

impl Refuser {
    pub fn new() -> Refuser {
        // Bind, note the port, close: connections to it are refused, not left hanging.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        Refuser { port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// One test's directory, children's model, and Subzero setup.
pub struct HostEnv {
    pub dir: TempDir,
    pub children: ScriptedServer,
    pub refuser: Refuser,
}

impl HostEnv {
    pub fn new(children: Vec<Reply>) -> HostEnv {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["home", "workspace"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
        }
        write_demo_workspace(&dir.path().join("workspace"));
        let children = ScriptedServer::start(children).expect("children's model");
        let env = HostEnv {
            dir,
            children,
            refuser: Refuser::new(),
        };
        std::fs::write(
            env.subzero_config(),
            credential_config(KEY_VAR, &env.children),
        )
        .expect("config");
        env
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir
            .path()
            .join("workspace")
            .canonicalize()
            .expect("workspace")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Not at the default place: `hosts install` must pass it to the broker.
    pub fn subzero_config(&self) -> PathBuf {
        self.dir.path().join("subzero.toml")
    }

    pub fn database(&self) -> PathBuf {
        self.state_dir().join("subzero.db")
    }

    /// The `model` argument of `subzero_spawn`.
    pub fn child_model(&self) -> Value {
        json!({"url": self.children.base_url(), "model": "scripted", "credentialRef": CRED})
    }

    /// A command with nothing of the test runner's environment: HOME, PATH, the state
    /// directory, the children's key, and every outside origin sent to the refusing proxy.
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = isolated_command(
            program,
            &self.home(),
            std::env::var_os("PATH").unwrap_or_default(),
            &self.refuser.url(),
        );
        cmd.current_dir(self.workspace())
            .env("SUBZERO_STATE_DIR", self.state_dir())
            .env(KEY_VAR, KEY);
        cmd
    }

    /// `subzero hosts install <host> <extra…>` as a user would run it in the workspace;
    /// returns what it printed.
    pub fn install(&self, host: &str, extra: &[&str]) -> String {
        let out = self
            .command(Path::new(env!("CARGO_BIN_EXE_subzero")))
            .args(["hosts", "install", host, "--subzero-config"])
            .arg(self.subzero_config())
            .args(extra)
            .output()
            .expect("subzero runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "hosts install {host} failed:\n{text}");
        text
    }

    /// What `<bin> --version` prints, trimmed.
    pub fn version(&self, bin: &Path) -> String {
        let out = self.command(bin).arg("--version").output().expect("runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `subzero ls` (the runner's view of the state directory), as JSON.
    pub fn subzero_ls(&self) -> String {
        let out = self
            .command(Path::new(env!("CARGO_BIN_EXE_subzero")))
            .args(["ls"])
            .output()
            .expect("subzero runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// (child id, child state, run status) of every run, from the database.
    pub fn runs(&self) -> Vec<(String, String, String)> {
        let conn = rusqlite::Connection::open_with_flags(
            self.database(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("open the database");
        let mut stmt = conn
            .prepare(
                "SELECT c.child_id, c.state, r.status FROM runs r \
                 JOIN children c ON c.child_id = r.child_id ORDER BY r.rowid",
            )
            .expect("query");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows")
    }
}

/// Runs `cmd` to its end, killed after `limit`; stdout, stderr and how it ended.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.process_group(0);
    let child = cmd.spawn().expect("host starts");
    match output_within(child, limit, kill_group) {
        Ok(output) => output,
        Err(output) => panic!(
            "the host did not finish within {limit:?}:\nstdout:\n{}\nstderr:\n{}",
            output
                .as_ref()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default(),
            output
                .as_ref()
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default()
        ),
    }
}

/// SIGKILL a whole process group (the host and everything it started in it).
pub fn kill_group(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A started host that the test ends itself.
pub struct Running {
    pub child: Child,
}

impl Running {
    pub fn start(mut cmd: Command) -> Running {
        use std::os::unix::process::CommandExt;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.process_group(0);
        Running {
            child: cmd.spawn().expect("host starts"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Ok(pid) = i32::try_from(self.pid()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }

    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            kill_group(self.child.id());
            let _ = self.child.wait();
        }
    }
}

/// The words the child answers with, and the scripted parent repeats.
pub const CHILD_ANSWER: &str = "The README describes a small demo project (marker 7c41).";
/// The child's answer to the followup.
pub const FOLLOWUP_ANSWER: &str = "Followup answered: it has one file (marker 93d2).";

/// What each plan does, told to the parent by a word in the user's prompt.
pub const DELEGATE: &str = "PLAN-DELEGATE";
pub const FOLLOW_UP: &str = "PLAN-FOLLOWUP";
pub const HANG: &str = "PLAN-HANG";

/// The parent's moves after the tools are loaded, as `(tool suffix, arguments)` built from
/// the conversation so far; `None` once the plan is done (the parent then answers).
pub fn next_call(seen: &Exchange, child_model: &Value) -> Option<(&'static str, Value)> {
    let child = || {
        seen.results
            .iter()
            .find_map(|r| r.id("ch_"))
            .unwrap_or_default()
    };
    let done = |suffix: &str| seen.count_of(suffix);
    if seen.prompt.contains(DELEGATE) || seen.prompt.contains(HANG) {
        let template = if seen.prompt.contains(HANG) {
            "coder"
        } else {
            "researcher"
        };
        if done("subzero_spawn") == 0 {
            return Some((
                "subzero_spawn",
                json!({"prompt": "Summarise README.md in one sentence.",
                       "templateId": template, "model": child_model}),
            ));
        }
        if done("subzero_get") == 0 {
            return Some(("subzero_get", json!({"childId": child(), "waitMs": 30000})));
        }
        return None;
    }
    if seen.prompt.contains(FOLLOW_UP) {
        if done("subzero_info") == 0 {
            return Some(("subzero_info", json!({})));
        }
        if done("subzero_list") == 0 {
            return Some(("subzero_list", json!({})));
        }
        // This broker never saw the child's credential: resume re-arms it (no new run).
        if done("subzero_resume") == 0 {
            return Some((
                "subzero_resume",
                json!({"childId": child(), "model": child_model}),
            ));
        }
        if done("subzero_send") == 0 {
            return Some((
                "subzero_send",
                json!({"childId": child(), "mode": "followup",
                       "message": "How many files does it have?"}),
            ));
        }
        if done("subzero_get") == 0 {
            return Some(("subzero_get", json!({"childId": child(), "waitMs": 30000})));
        }
        if done("subzero_output") == 0 {
            let artifact = seen
                .last_of("subzero_get")
                .and_then(|r| json_in(&r.text))
                .and_then(|snap| snap.pointer("/lastRun/artifactId").cloned())
                .unwrap_or_default();
            return Some(("subzero_output", json!({"artifactId": artifact})));
        }
        return None;
    }
    None
}

/// Whether the broker's `subzero_info` (as the host passed it on) reports `host` at `version`
/// in `hostAdapters` — the row of `crates/subzero/src/hosts/tested.rs` this suite keeps true.
pub fn reports_tested(seen: &Exchange, host: &str, version: &str) -> bool {
    seen.last_of("subzero_info")
        .and_then(|r| json_in(&r.text))
        .and_then(|info| info.get("hostAdapters").cloned())
        .and_then(|a| a.as_array().cloned())
        .is_some_and(|rows| {
            rows.iter()
                .any(|r| r["host"] == json!(host) && r["testedVersion"] == json!(version))
        })
}

/// The JSON object in a tool result's text: hosts may wrap it (Codex prefixes
/// `Wall time: … Output:`).
pub fn json_in(text: &str) -> Option<Value> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    serde_json::from_str(text.get(start..=end)?).ok()
}

/// The parent's final answer: what the last Subzero tools said, word for word.
pub fn final_answer(seen: &Exchange) -> String {
    let said = |suffix: &str| {
        seen.last_of(suffix)
            .map(|r| r.text.clone())
            .unwrap_or_default()
    };
    if seen.prompt.contains(FOLLOW_UP) {
        let listed = if said("subzero_list").contains("ch_") {
            "listed"
        } else {
            "not listed"
        };
        return format!(
            "Child {listed}. Output: {}",
            said("subzero_output").replace('\n', " ")
        );
    }
    let get = said("subzero_get");
    if get.contains(CHILD_ANSWER) {
        format!("The child answered: {CHILD_ANSWER}")
    } else {
        format!("The child gave no answer: {get}")
    }
}

/// A brain around a host-specific prelude (e.g. Claude Code's `ToolSearch`) and naming.
pub fn brain(
    child_model: Value,
    name: impl Fn(&Exchange, &str) -> String + Send + Sync + 'static,
    prelude: impl Fn(&Exchange) -> Option<Act> + Send + Sync + 'static,
    turns: Arc<AtomicUsize>,
) -> subzero_testkit::parent::Brain {
    Arc::new(move |seen: &Exchange| {
        turns.fetch_add(1, Ordering::Relaxed);
        if let Some(act) = prelude(seen) {
            return act;
        }
        match next_call(seen, &child_model) {
            Some((tool, arguments)) => Act::call(&name(seen, tool), arguments),
            None => Act::Say(final_answer(seen)),
        }
    })
}

/// The first turn that declares the Subzero tools declares all 8 under the host's naming.
pub fn assert_tools_loaded(turns: &[Exchange], tool: impl Fn(&str) -> String) {
    let loaded = turns
        .iter()
        .find(|t| t.declares(&tool("subzero_spawn")))
        .expect("a turn declares the Subzero tools");
    for name in TOOLS {
        assert!(
            loaded.declares(&tool(name)),
            "{name} missing: {:?}",
            loaded.tools
        );
    }
}

/// The child the newest `subzero_spawn` of these turns started.
pub fn spawned_child(turns: &[Exchange]) -> String {
    let spawned = turns
        .iter()
        .rev()
        .find_map(|t| t.last_of("subzero_spawn").cloned())
        .expect("spawn ran");
    spawned.id("ch_").expect("spawn answered a child id")
}

/// After the followup plan: the second process listed `child`, its `subzero_info` reports
/// `host` at `version`, the followup went to `child`, and the children's model ran twice.
pub fn assert_followed_up(
    parent: &ParentServer,
    env: &HostEnv,
    child: &str,
    host: &str,
    version: &str,
) {
    let last = parent.exchanges().pop().expect("turns");
    let listed = last.last_of("subzero_list").expect("list ran");
    assert!(listed.text.contains(child), "{}", listed.text);
    assert!(
        reports_tested(&last, host, version),
        "subzero_info.hostAdapters lacks {host} {version}: {:?}",
        last.last_of("subzero_info")
    );
    let sent = last.last_of("subzero_send").expect("send ran");
    assert_eq!(sent.arguments["childId"], json!(child));
    assert_eq!(env.children.requests().len(), 2, "two child runs");
}

/// A host to quit mid-run: its setup, how `subzero hosts install` is run for it, how it is
/// started on a prompt, and its names for failure messages.
pub struct QuitCase<'a> {
    pub env: &'a HostEnv,
    pub parent: &'a ParentServer,
    /// The `subzero hosts install` host name and flags.
    pub install: (&'a str, &'a [&'a str]),
    /// The host's executable name (`claude`) and product name (`Claude Code`).
    pub exe: &'a str,
    pub product: &'a str,
    /// The host's command for a headless run of a prompt.
    pub command: &'a dyn Fn(&str) -> Command,
}

/// The host quitting (SIGINT) while a `subzero_get` waits on a child running a `bash` tool
/// leaves no broker, worker or tool process, and the run is recorded `stopped`.
pub fn quitting_mid_run_leaves_nothing_running_and_records_stopped(case: &QuitCase<'_>) {
    let env = case.env;
    let mark = unique_mark(env.dir.path());
    env.children.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": format!("export {mark}; sleep 1000")}).to_string(),
    ));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    env.install(case.install.0, case.install.1);

    let mut host = Running::start((case.command)(&format!("{HANG}: start a coder child.")));
    let waiting = eventually(Duration::from_secs(60), || {
        !marked(&mark).is_empty()
            && case
                .parent
                .exchanges()
                .iter()
                .any(|t| t.count_of("subzero_spawn") > 0)
    });
    assert!(waiting, "the child's bash tool never started");
    // The parent has answered with its `subzero_get` (waitMs 30000): a moment later the host
    // has handed it to the broker, which waits in it.
    assert!(
        eventually(Duration::from_secs(60), || case
            .parent
            .called("subzero_get")
            > 0),
        "the parent never called subzero_get"
    );
    std::thread::sleep(Duration::from_millis(100));
    let dir = env.dir.path().to_string_lossy().into_owned();
    assert!(!processes_naming(&dir).is_empty(), "no broker is running");

    host.signal(nix::sys::signal::Signal::SIGINT);
    let exit = host.wait(Duration::from_secs(30));
    assert!(exit.is_some(), "{} did not exit after SIGINT", case.exe);
    let clean = eventually(Duration::from_secs(10), || {
        processes_naming(&dir).is_empty()
            && marked(&mark).is_empty()
            && running_in(env.dir.path()).is_empty()
    });
    assert!(
        clean,
        "left running after {} quit: brokers/workers {:?}, tools {:?}, in the workspace {:?}",
        case.product,
        processes_naming(&dir),
        marked(&mark),
        running_in(env.dir.path())
    );
    let runs = env.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].2, "stopped", "{runs:?}\n{}", env.subzero_ls());
}
