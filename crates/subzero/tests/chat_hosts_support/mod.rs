//! A real host that calls its model over Chat Completions (OpenCode, Pi), installed from
//! `tests/hosts/<host>/package-lock.json`, configured with `subzero hosts install` alone and run
//! headless against a scripted parent model on loopback; its children run against the
//! Chat Completions `ScriptedServer`.
//!
//! The parent ([`parent`]) reads each request's conversation and plays one of three scenarios,
//! named in the prompt: [`DELEGATE`] (info, spawn, get, a followup, get, output, then an answer
//! quoting the child), [`LIST`] (a second host process lists the children) and [`QUIT`] (spawn
//! a coder whose `bash` sleeps, wait on it with `subzero_get`, and the test ends the host).
//!
//! Everything a host run touches lives in one temporary directory: `home/` (HOME, so the
//! host's config, Subzero's config at `~/.config/subzero/config.toml` and its state at
//! `~/.local/state/subzero` are all the test's) and `work/` (the workspace). The host gets a
//! cleared environment; outside origins go to a proxy address on loopback that refuses at once,
//! so a host that tries one fails fast instead of hanging.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::parent::{Act, Exchange, ParentServer, find_id};
use subzero_testkit::procs::{Proc, processes, running_in, sigkill};
use subzero_testkit::{Reply, ScriptedServer};
use tempfile::TempDir;

/// The key the children's scripted model is called with.
pub const KEY: &str = "sk-subzero-chat-host-test-3c9d41";
/// The variable Subzero's config reads that key from.
pub const KEY_VAR: &str = "SUBZERO_CHAT_HOST_TEST_KEY";
/// The credential reference the parent names in `subzero_spawn`.
pub const CRED: &str = "scripted";

/// The 8 Subzero tools, by their MCP names.
pub const TOOLS: [&str; 8] = [
    "subzero_spawn",
    "subzero_get",
    "subzero_send",
    "subzero_stop",
    "subzero_resume",
    "subzero_output",
    "subzero_list",
    "subzero_info",
];

/// Scenario words the parent looks for in the prompt.
pub const DELEGATE: &str = "scenario-delegate";
pub const LIST: &str = "scenario-list";
pub const QUIT: &str = "scenario-quit";

/// What the child answers to its first prompt and to the followup.
pub const FIRST_ANSWER: &str = "CHILD-ANSWER-ONE: the README describes a demo project.";
pub const FOLLOWUP_ANSWER: &str = "CHILD-ANSWER-TWO: it has no license file.";

/// Where any outside origin is sent: a loopback port nothing listens on.
pub const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// One host under test.
#[derive(Debug, Clone, Copy)]
pub struct HostSpec {
    /// The `subzero hosts` name, also the directory under `tests/hosts/`.
    pub name: &'static str,
    /// The npm package the host comes from.
    pub package: &'static str,
    /// The host's executable, relative to the project's `node_modules`.
    pub bin: &'static str,
    /// What the host puts before an MCP tool's name (`subzero_` for OpenCode).
    pub tool_prefix: &'static str,
}

impl HostSpec {
    /// `tests/hosts/<name>`: the host's npm project.
    pub fn project(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/hosts")
            .join(self.name)
    }

    /// The host's executable, or `None` after saying loudly why the test is skipped. Under CI
    /// a missing host fails the test.
    pub fn binary(&self) -> Option<PathBuf> {
        let bin = self.project().join("node_modules").join(self.bin);
        if bin.exists() {
            return Some(bin);
        }
        let how = format!(
            "(cd {} && npm ci --prefer-offline --no-audit --no-fund)",
            self.project().display()
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the host: {} is missing; .ci/run runs {how}",
            bin.display()
        );
        eprintln!(
            "\n*** SKIPPED: {} is not installed; run {how} ***\n",
            bin.display()
        );
        None
    }

    /// The version the lockfile pins (what `npm ci` installs).
    pub fn pinned_version(&self) -> String {
        let lock = read_json(&self.project().join("package-lock.json"));
        let key = format!("node_modules/{}", self.package);
        lock["packages"][key.as_str()]["version"]
            .as_str()
            .unwrap_or_else(|| panic!("package-lock.json pins no {}", self.package))
            .to_owned()
    }

    /// The version installed in `node_modules`.
    pub fn installed_version(&self) -> String {
        let manifest = read_json(
            &self
                .project()
                .join("node_modules")
                .join(self.package)
                .join("package.json"),
        );
        manifest["version"]
            .as_str()
            .expect("installed package.json has a version")
            .to_owned()
    }

    /// The host's own name for a Subzero tool.
    pub fn tool(&self, name: &str) -> String {
        format!("{}{name}", self.tool_prefix)
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The temporary home and workspace, the parent and the children's models.
pub struct Rig {
    pub spec: HostSpec,
    pub bin: PathBuf,
    pub dir: TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub parent: ParentServer,
    pub child: ScriptedServer,
}

impl Rig {
    /// Everything but the host's own model configuration, which [`Rig::write`] adds.
    pub fn new(spec: HostSpec, bin: PathBuf) -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let home = root.join("home");
        let workspace = root.join("work");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&workspace).expect("workspace");
        std::fs::write(
            workspace.join("README.md"),
            "# Demo project\n\nA small project for Subzero's host tests.\n",
        )
        .expect("readme");
        let child = ScriptedServer::start(Vec::new()).expect("child model");
        let child_model = json!({
            "url": child.base_url(),
            "model": "scripted-child",
            "credentialRef": CRED,
        });
        let parent = subzero_testkit::chat::start(parent(spec, child_model)).expect("parent");
        let origin = child.base_url().trim_end_matches("/v1").to_owned();
        let rig = Rig {
            spec,
            bin,
            dir,
            home,
            workspace,
            parent,
            child,
        };
        // Subzero's user config, where the README says it lives.
        rig.write(
            ".config/subzero/config.toml",
            &format!("[credentials.{CRED}]\nenv = \"{KEY_VAR}\"\norigins = [\"{origin}\"]\n"),
        );
        rig
    }

    /// The parent's base URL, as a Chat Completions provider takes it.
    pub fn parent_url(&self) -> String {
        format!("{}/v1", self.parent.origin())
    }

    /// Writes `text` to `rel` under HOME.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.home.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(&path, text).expect("write");
    }

    /// A command with the environment every process of the test gets: HOME, a PATH whose
    /// first entry is the host's `node_modules/.bin` (Pi's `node` comes from there), the
    /// children's key, and proxies that refuse every origin but loopback.
    pub fn command(&self, program: &Path) -> Command {
        let bin_dir = self.spec.project().join("node_modules/.bin");
        let path =
            std::env::join_paths([bin_dir.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
                .expect("PATH");
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.workspace)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", path)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("NO_COLOR", "1")
            .env("CI", "true")
            .env(KEY_VAR, KEY)
            .env("HTTP_PROXY", DEAD_PROXY)
            .env("HTTPS_PROXY", DEAD_PROXY)
            .env("http_proxy", DEAD_PROXY)
            .env("https_proxy", DEAD_PROXY)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .stdin(Stdio::null());
        cmd
    }

    /// `subzero hosts install <host>` run in the workspace, as a user would; returns stdout.
    pub fn install_subzero(&self) -> String {
        let out = self
            .command(Path::new(env!("CARGO_BIN_EXE_subzero")))
            .args(["hosts", "install", self.spec.name])
            .output()
            .expect("run subzero hosts install");
        assert!(out.status.success(), "install failed: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the host to completion (at most `limit`); fails the test on a timeout.
    pub fn run(&self, args: &[&str], extra_env: &[(&str, &str)], limit: Duration) -> Output {
        let mut cmd = self.command(&self.bin);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start the host");
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(limit) {
            Ok(out) => out.expect("host output"),
            Err(_) => {
                sigkill(pid);
                let out = rx.recv().ok().and_then(Result::ok);
                panic!(
                    "{} {args:?} did not finish within {limit:?}; output: {}",
                    self.spec.name,
                    out.as_ref().map(text).unwrap_or_default()
                );
            }
        }
    }

    /// Starts the host and returns at once (for the quit scenario).
    pub fn start(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Child {
        let mut cmd = self.command(&self.bin);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start the host")
    }

    /// `subzero ls --json` with the test's HOME: the children the state directory holds.
    pub fn children(&self) -> Vec<Value> {
        let out = self
            .command(Path::new(env!("CARGO_BIN_EXE_subzero")))
            .args(["ls", "--json"])
            .output()
            .expect("run subzero ls");
        assert!(out.status.success(), "subzero ls failed: {}", text(&out));
        let listed: Value = serde_json::from_slice(&out.stdout).expect("ls --json is JSON");
        listed["children"].as_array().cloned().unwrap_or_default()
    }

    /// Processes this test started that are still alive: anything running in the temp dir
    /// (host helpers, the broker, workers, tool processes) or a `subzero` whose arguments name
    /// it. The test process itself is left out.
    pub fn leftovers(&self) -> Vec<Proc> {
        let root = self.dir.path().canonicalize().expect("temp dir");
        let root_text = root.to_string_lossy().into_owned();
        let mut found = running_in(&root);
        for p in processes() {
            let ours = p.argv.iter().any(|a| a.contains(&root_text));
            if ours && p.pid != std::process::id() && !found.iter().any(|f| f.pid == p.pid) {
                found.push(p);
            }
        }
        found
    }

    /// The exchanges the parent has seen that carried the Subzero tools (model turns of the
    /// main agent, not title or summary requests).
    pub fn turns(&self) -> Vec<Exchange> {
        let spawn = self.spec.tool("subzero_spawn");
        self.parent
            .exchanges()
            .into_iter()
            .filter(|e| e.declares(&spawn))
            .collect()
    }

    /// The subzero tool results the newest turn of `scenario` carries.
    pub fn last_turn(&self, scenario: &str) -> Exchange {
        self.turns()
            .into_iter()
            .rev()
            .find(|e| e.prompt.contains(scenario))
            .unwrap_or_else(|| panic!("no turn of {scenario} reached the parent"))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // A failed test must not leave its host, broker or workers behind.
        for p in self.leftovers() {
            sigkill(p.pid);
        }
    }
}

/// stdout and stderr of a finished process, for failure messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        tail(&String::from_utf8_lossy(&out.stderr), 60)
    )
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `check` every 50 ms until it holds or `limit` passes.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The scripted parent for `spec`'s tool naming; `child_model` is the `model` of each spawn.
fn parent(spec: HostSpec, child_model: Value) -> subzero_testkit::parent::Brain {
    Arc::new(move |seen: &Exchange| {
        if !seen.declares(&spec.tool("subzero_spawn")) {
            // Not the agent's turn (OpenCode's title request): any short text will do.
            return Act::say("Subzero host test");
        }
        if seen.prompt.contains(QUIT) {
            quit(spec, seen, &child_model)
        } else if seen.prompt.contains(LIST) {
            list(spec, seen)
        } else {
            delegate(spec, seen, &child_model)
        }
    })
}

fn delegate(spec: HostSpec, seen: &Exchange, child_model: &Value) -> Act {
    let r = &seen.results;
    let child = || r.get(1).and_then(|s| s.id("ch_")).unwrap_or_default();
    match r.len() {
        0 => Act::call(&spec.tool("subzero_info"), json!({})),
        1 => Act::call(
            &spec.tool("subzero_spawn"),
            json!({"templateId": "researcher", "prompt": "Summarize README.md", "model": child_model}),
        ),
        2 => Act::call(
            &spec.tool("subzero_get"),
            json!({"childId": child(), "waitMs": 25000}),
        ),
        3 => Act::call(
            &spec.tool("subzero_send"),
            json!({"childId": child(), "mode": "followup", "message": "Is there a license?"}),
        ),
        4 => Act::call(
            &spec.tool("subzero_get"),
            json!({"childId": child(), "waitMs": 25000}),
        ),
        5 => Act::call(
            &spec.tool("subzero_output"),
            json!({"artifactId": field(&r[4].text, "/lastRun/artifactId")}),
        ),
        _ => {
            let first = field(&r[2].text, "/lastRun/preview");
            let output = field(&r[5].text, "/text");
            Act::Say(format!("The child answered: {first} Then: {output}"))
        }
    }
}

fn list(spec: HostSpec, seen: &Exchange) -> Act {
    match seen.results.first() {
        None => Act::call(&spec.tool("subzero_list"), json!({})),
        Some(listed) => Act::Say(format!("Children: {}", ids(&listed.text, "ch_").join(", "))),
    }
}

fn quit(spec: HostSpec, seen: &Exchange, child_model: &Value) -> Act {
    match seen.results.first() {
        None => Act::call(
            &spec.tool("subzero_spawn"),
            json!({"templateId": "coder", "prompt": "Run the long job", "model": child_model}),
        ),
        Some(spawned) => Act::call(
            &spec.tool("subzero_get"),
            json!({"childId": spawned.id("ch_").unwrap_or_default(), "waitMs": 30000}),
        ),
    }
}

/// A string field of a tool result's JSON text, or the whole text when it is not JSON.
fn field(text: &str, pointer: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| text.to_owned())
}

/// Every distinct `<prefix>…` id in `text`, in order.
pub fn ids(text: &str, prefix: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(id) = find_id(rest, prefix) {
        let at = rest.find(&id).expect("found id") + id.len();
        if !found.contains(&id) {
            found.push(id);
        }
        rest = &rest[at..];
    }
    found
}

/// Scripts the child's replies for the delegate scenario: one answer per run.
pub fn script_delegate(rig: &Rig) {
    rig.child.push(Reply::text(FIRST_ANSWER));
    rig.child.push(Reply::text(FOLLOWUP_ANSWER));
}

/// Scripts the child's reply for the quit scenario: a `bash` call whose sleep outlives the
/// test, so the run is mid-tool when the host quits.
pub fn script_quit(rig: &Rig) {
    rig.child.push(Reply::tool_call(
        "call_sleep",
        "bash",
        &json!({"command": "sleep 600"}).to_string(),
    ));
}

/// The quit scenario's tool processes: `sleep 600` in the test's workspace.
pub fn sleeping(rig: &Rig) -> Vec<u32> {
    running_in(&rig.workspace)
        .into_iter()
        .filter(|p| {
            p.argv.first().is_some_and(|a| a.ends_with("sleep"))
                && p.argv.get(1).is_some_and(|a| a == "600")
        })
        .map(|p| p.pid)
        .collect()
}

/// Sends `signal` to `pid` (a host the test started and has not waited for).
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
    let _ = nix::sys::signal::kill(pid, signal);
}

/// Waits for `child` to exit within `limit`; kills it and fails the test otherwise.
pub fn wait_exit(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} was still running {limit:?} after it was told to quit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the host on `prompt` headless to completion.
pub type RunHost<'a> = &'a dyn Fn(&str) -> Output;
/// Starts the host on `prompt` headless and returns at once.
pub type StartHost<'a> = &'a dyn Fn(&str) -> Child;

/// The delegate scenario in one host process: the 8 tools reach the model under the host's
/// naming, `subzero_info` reports this host at its installed version, and spawn → get →
/// followup → get → output ends in an answer quoting both child runs. Returns the child id.
pub fn delegate_and_follow_up(rig: &Rig, run: RunHost<'_>) -> String {
    let spec = rig.spec;
    assert_eq!(
        spec.installed_version(),
        spec.pinned_version(),
        "node_modules is not what the lockfile pins: run npm ci in {}",
        spec.project().display()
    );
    script_delegate(rig);
    let out = run(&format!(
        "{DELEGATE}: delegate the README summary to a child"
    ));
    assert!(out.status.success(), "the host run failed: {}", text(&out));

    let first = rig
        .turns()
        .into_iter()
        .next()
        .expect("the parent was called with the Subzero tools");
    for tool in TOOLS {
        assert!(
            first.declares(&spec.tool(tool)),
            "{} is not declared to the model as {}; declared: {:?}",
            tool,
            spec.tool(tool),
            first.tools
        );
    }

    let seen = rig.last_turn(DELEGATE);
    let called: Vec<&str> = seen.results.iter().map(|r| r.tool.as_str()).collect();
    let wanted: Vec<String> = [
        "subzero_info",
        "subzero_spawn",
        "subzero_get",
        "subzero_send",
        "subzero_get",
        "subzero_output",
    ]
    .iter()
    .map(|t| spec.tool(t))
    .collect();
    assert_eq!(called, wanted, "the tool calls the host ran");

    // The one table of tested hosts is what the broker reports, and it names this version.
    let info: Value = serde_json::from_str(&seen.results[0].text).expect("info is JSON");
    let adapters = info["hostAdapters"].as_array().cloned().unwrap_or_default();
    assert!(
        adapters.contains(&json!({"host": spec.name, "testedVersion": spec.installed_version()})),
        "subzero_info.hostAdapters {adapters:?} does not list {} {} \
         (update crates/subzero/src/hosts/tested.rs with the pin)",
        spec.name,
        spec.installed_version()
    );

    let child = seen.results[1]
        .id("ch_")
        .unwrap_or_else(|| panic!("spawn answered no child id: {}", seen.results[1].text));
    assert!(
        seen.results[2].text.contains(FIRST_ANSWER),
        "get did not carry the child's result: {}",
        seen.results[2].text
    );
    assert!(
        seen.results[3].id("run_").is_some(),
        "send started no run: {}",
        seen.results[3].text
    );
    assert!(
        seen.results[5].text.contains(FOLLOWUP_ANSWER),
        "subzero_output did not return the followup's answer: {}",
        seen.results[5].text
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(FIRST_ANSWER) && stdout.contains(FOLLOWUP_ANSWER),
        "the host's final answer does not quote the child: {}",
        text(&out)
    );
    let listed = rig.children();
    let summary = listed
        .iter()
        .find(|c| c["childId"] == child.as_str())
        .unwrap_or_else(|| panic!("subzero ls does not list {child}: {listed:?}"));
    assert_eq!(summary["state"], "ready", "{summary}");
    assert_eq!(summary["lastRunStatus"], "completed", "{summary}");
    child
}

/// A second host process (a new broker on the same state) lists the child.
pub fn a_second_process_lists(rig: &Rig, run: RunHost<'_>, child: &str) {
    let out = run(&format!("{LIST}: which children exist?"));
    assert!(out.status.success(), "the host run failed: {}", text(&out));
    let seen = rig.last_turn(LIST);
    assert_eq!(
        seen.results.first().map(|r| r.tool.clone()),
        Some(rig.spec.tool("subzero_list"))
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(child),
        "the second process did not list {child}: {}",
        text(&out)
    );
}

/// The host is told to quit (`quit`) while the parent waits in `subzero_get` on a coder whose
/// `bash` sleeps: the host exits, no broker, worker or tool process is left, and the run is
/// recorded `stopped` (a confirmed stop, not `interrupted`).
pub fn quitting_mid_run_stops_the_run(
    rig: &Rig,
    start: StartHost<'_>,
    quit: nix::sys::signal::Signal,
) {
    script_quit(rig);
    let mut host = start(&format!("{QUIT}: run the long job in a child"));
    let waiting = eventually(Duration::from_secs(90), || {
        !sleeping(rig).is_empty()
            && rig
                .turns()
                .iter()
                .any(|t| t.prompt.contains(QUIT) && !t.results.is_empty())
    });
    if !waiting {
        let _ = host.kill();
        let out = host.wait_with_output().expect("host output");
        panic!(
            "the child's tool never ran while the parent waited: {}",
            text(&out)
        );
    }
    // The parent's get call is in flight now: give the host a moment to be inside it.
    std::thread::sleep(Duration::from_millis(500));
    let broker = rig
        .leftovers()
        .into_iter()
        .find(|p| p.argv.get(1).is_some_and(|a| a == "mcp"))
        .expect("the host's broker is running");
    signal(host.id(), quit);
    let quit_at = Instant::now();
    let status = wait_exit(&mut host, Duration::from_secs(30), rig.spec.name);
    eprintln!(
        "{} exited {:?} after {quit:?}: {status:?}",
        rig.spec.name,
        quit_at.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(15), || rig.leftovers().is_empty()),
        "processes survived the host (broker was {}): {:#?}",
        broker.pid,
        rig.leftovers()
    );
    let children = rig.children();
    let coder = children
        .iter()
        .find(|c| c["templateId"] == "coder")
        .unwrap_or_else(|| panic!("no coder child recorded: {children:?}"));
    assert_eq!(
        (coder["state"].as_str(), coder["lastRunStatus"].as_str()),
        (Some("ready"), Some("stopped")),
        "the run the host left: {coder}"
    );
}
