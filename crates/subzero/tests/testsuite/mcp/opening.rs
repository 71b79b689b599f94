//! When the broker opens its state: not before the host has the `initialize` reply. The reply
//! is all a host waits for at start, so the state (database, migrations, recovery, probes)
//! opens once the host says `notifications/initialized`, or at the first tool call of a host
//! that never says it; every call sees the opened state either way.

use std::path::Path;
use std::time::Duration;

use crate::support::faults::{RawBroker, Reaper, eventually};
use crate::support::mcp::Env;
use crate::support::mcp::{last_status, p};
use serde_json::json;
use subzero_testkit::Reply;

fn database(state: &Path) -> std::path::PathBuf {
    state.join("subzero.db")
}

#[test]
fn the_state_opens_once_the_host_has_the_initialize_reply() {
    let env = Env::new(vec![Reply::text("unused")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::initialize(&env.command("broker"));
    reaper.broker(Some(broker.pid()));

    // Answered, and nothing opened while the host has not said it has the reply: the broker
    // answers a ping written after it, and a moment later has still not opened the state.
    assert!(broker.ping().is_some(), "the broker does not answer a ping");
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !database(&env.state_dir()).exists(),
        "the state was opened before the host said `initialized`"
    );

    broker.initialized();
    assert!(
        eventually(Duration::from_secs(10), || database(&env.state_dir())
            .exists()),
        "the state did not open after `initialized`"
    );
    let listed = broker.typed::<p::ListOutput>("subzero_list", json!({}));
    assert!(listed.children.is_empty(), "{listed:#?}");
    broker.close_stdin();
    assert!(broker.wait_exit(Duration::from_secs(10)).is_some());
}

#[test]
fn a_host_that_never_says_initialized_is_served_at_its_first_call() {
    let env = Env::new(vec![Reply::text("Done without initialized.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::initialize(&env.command("broker"));
    reaper.broker(Some(broker.pid()));

    let out = broker.typed::<p::SpawnOutput>(
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "researcher", "model": env.model()}),
    );
    let child = out.child_id.as_str().to_owned();
    let snap =
        broker.typed::<p::ChildSnapshot>("subzero_get", json!({"childId": child, "waitMs": 20000}));
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert!(database(&env.state_dir()).exists());
    broker.close_stdin();
    assert!(broker.wait_exit(Duration::from_secs(10)).is_some());
}

#[test]
fn a_host_that_closes_stdin_right_after_initialize_leaves_an_opened_state() {
    // EOF is a use too: the broker opens, records its shutdown, and exits 0.
    let env = Env::new(vec![Reply::text("unused")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::initialize(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    broker.close_stdin();
    let status = broker
        .wait_exit(Duration::from_secs(10))
        .expect("the broker exits at EOF");
    assert!(status.success(), "{status:?}");
    assert!(database(&env.state_dir()).exists());
}
