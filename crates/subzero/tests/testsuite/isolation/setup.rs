//! A template's setup command: run once in a new checkout before the child's first run, in
//! the child's sandbox, reported as `tool` events named `setup`; a failed one is told to
//! the model and the run goes on; a shared child never runs it.

use std::sync::Arc;

use serde_json::json;
use subzero_testkit::mcp_client::McpSession;
use subzero_testkit::{RecordedRequest, Reply};

use super::support::*;

/// A coder template that isolates by default, with `setup`.
fn setup_template(g: &GitEnv, setup: &str) {
    g.add_template(
        "built",
        &format!(
            "description = \"Codes in a checkout it sets up\"\ninstructions = \"Code.\"\ntools = [\"bash\", \"write\"]\nisolation = \"checkout\"\nsetup = {}",
            toml_string(setup)
        ),
    );
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a JSON string is a TOML basic string")
}

async fn spawn_built(g: &GitEnv, s: &McpSession, plan: &str, isolation: &str) -> String {
    let out: p::SpawnOutput = typed(
        s,
        "subzero_spawn",
        json!({"prompt": plan, "templateId": "built", "model": g.model_arg(), "isolation": isolation}),
    )
    .await;
    out.child_id.to_string()
}

fn setup_events(snap: &p::ChildSnapshot) -> Vec<p::ToolState> {
    snap.events
        .iter()
        .filter_map(|e| match e {
            p::ChildEvent::Tool { name, state, .. } if name.as_str() == "setup" => Some(*state),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_runs_once_in_the_new_checkout_before_the_first_model_request() {
    let g = GitEnv::new();
    // Ignored output (what `npm ci` makes) and a count of how often it ran.
    setup_template(
        &g,
        "mkdir -p ignored && echo built > ignored/cache.txt && echo run >> ignored/runs",
    );
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let child = spawn_built(
        &g,
        &s,
        "PLAN bash cat ignored/cache.txt > seen.txt",
        "checkout",
    )
    .await;
    let snap = settled_child(&s, &child).await;
    assert_eq!(
        setup_events(&snap),
        [p::ToolState::Started, p::ToolState::Finished],
        "{snap:#?}"
    );
    // Before the model's first tool call.
    let first_setup = snap
        .events
        .iter()
        .position(|e| matches!(e, p::ChildEvent::Tool { name, .. } if name.as_str() == "setup"));
    let first_bash = snap
        .events
        .iter()
        .position(|e| matches!(e, p::ChildEvent::Tool { name, .. } if name.as_str() == "bash"));
    assert!(first_setup < first_bash, "{snap:#?}");
    let co = checkout(&snap);
    let dir = std::path::Path::new(&co.path);
    assert_eq!(
        std::fs::read_to_string(dir.join("seen.txt")).expect("the run saw setup's output"),
        "built\n"
    );
    // Setup's ignored output is not the child's change; what the child wrote is.
    let change = co.change.as_ref().expect("a change");
    assert_eq!(change.files_changed, 1, "{co:#?}");
    assert!(
        !g.workspace().join("ignored").exists(),
        "setup wrote the workspace"
    );

    // A followup works on in the same checkout: no second setup.
    send(
        &s,
        json!({"childId": child, "message": "PLAN bash echo again > again.txt", "mode": "followup"}),
    )
    .await;
    let snap = until_snap(&s, &child, std::time::Duration::from_secs(60), |snap| {
        snap.state == p::ChildState::Ready && dir.join("again.txt").exists()
    })
    .await;
    assert_eq!(setup_events(&snap).len(), 2, "{snap:#?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("ignored/runs")).expect("runs"),
        "run\n"
    );
    s.close().await.expect("close");
}

/// The note the worker gives the model when setup failed.
const NOTE: &str = "setup command ran in your checkout and failed";

/// Answers `saw: <the note's last line>` when the first request carries the note, else
/// `no note`.
fn tells_what_it_saw(request: &RecordedRequest) -> Reply {
    let body = request.json().unwrap_or_default();
    let texts: Vec<String> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            serde_json::Value::String(text) => text.clone(),
            other => other
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|part| part["text"].as_str())
                .collect(),
        })
        .collect();
    match texts.iter().find(|t| t.contains(NOTE)) {
        Some(note) => Reply::text(&format!("saw: {}", note.lines().last().unwrap_or_default())),
        None => Reply::text("no note"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_setup_is_told_to_the_model_and_cannot_write_outside_the_checkout() {
    let g = GitEnv::with_model(Arc::new(tells_what_it_saw));
    let escape = g.workspace().join("escaped-by-setup.txt");
    setup_template(
        &g,
        &format!(
            "echo out > {} ; echo 'npm ERR! no package.json here' >&2 ; exit 3",
            escape.display()
        ),
    );
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let child = spawn_built(&g, &s, "build it", "checkout").await;
    let snap = settled_child(&s, &child).await;
    assert_eq!(
        setup_events(&snap),
        [p::ToolState::Started, p::ToolState::Failed],
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).preview.as_str(),
        "saw: npm ERR! no package.json here",
        "{snap:#?}"
    );
    assert!(!escape.exists(), "setup wrote the main checkout");
    assert_eq!(checkout(&snap).state, p::CheckoutState::SettledUnchanged);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shared_child_of_a_template_with_setup_does_not_run_it() {
    let g = GitEnv::with_model(Arc::new(plan_answer));
    setup_template(&g, "echo ran > setup-ran.txt");
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let child = spawn_built(&g, &s, "PLAN none", "shared").await;
    let snap = settled_child(&s, &child).await;
    assert!(setup_events(&snap).is_empty(), "{snap:#?}");
    assert!(!g.workspace().join("setup-ran.txt").exists());
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_whose_setup_cannot_write_is_refused_at_spawn() {
    let g = GitEnv::new();
    g.add_template(
        "reads",
        "description = \"Reads\"\ninstructions = \"Read.\"\ntools = [\"read\", \"bash\"]\nread_only = true\nsetup = \"npm ci\"",
    );
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let reply = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN none", "templateId": "reads", "model": g.model_arg(), "isolation": "checkout"}),
    )
    .await;
    assert_eq!(reply.code(), Some("unsupported_grant"), "{}", reply.text);
    assert!(reply.text.contains("setup"), "{}", reply.text);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pi_worker_runs_setup_the_same_way() {
    if !crate::mcp::pi_worker::pi_ready() {
        return;
    }
    let g = GitEnv::with_model(Arc::new(tells_what_it_saw));
    g.add_template(
        "pi-built",
        "description = \"Codes on Pi in a checkout it sets up\"\ninstructions = \"Code.\"\ntools = [\"bash\", \"write\"]\nworker = \"pi\"\nisolation = \"checkout\"\nsetup = \"mkdir -p ignored && echo built > ignored/cache.txt && echo 'npm ERR! half done' >&2 && exit 4\"",
    );
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let out: p::SpawnOutput = typed(
        &s,
        "subzero_spawn",
        json!({"prompt": "build it", "templateId": "pi-built", "model": g.model_arg()}),
    )
    .await;
    let child = out.child_id.to_string();
    let snap = settled_child(&s, &child).await;
    assert_eq!(
        setup_events(&snap),
        [p::ToolState::Started, p::ToolState::Failed],
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).preview.as_str(),
        "saw: npm ERR! half done",
        "{snap:#?}"
    );
    let co = checkout(&snap);
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&co.path).join("ignored/cache.txt"))
            .expect("setup wrote its checkout"),
        "built\n"
    );
    s.close().await.expect("close");
}
