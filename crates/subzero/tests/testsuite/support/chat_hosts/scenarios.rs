//! The scenarios every chat host runs, each a test body the host's test file calls with its
//! own way of running the host: delegate and follow up, a second process lists, quitting
//! mid-run stops the run.

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::procs::running_in;

use super::{DELEGATE, FIRST_ANSWER, FOLLOWUP_ANSWER, LIST, QUIT, Rig, TOOLS, eventually, text};

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
    // The parent has answered with its get call: a moment later the host is inside it.
    assert!(
        eventually(Duration::from_secs(60), || rig.parent.called("subzero_get")
            > 0),
        "the parent never called subzero_get"
    );
    std::thread::sleep(Duration::from_millis(100));
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
