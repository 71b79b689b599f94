//! Templates on `worker = "pi"` through the real `subzero mcp`: a researcher and a coder
//! complete real tool calls end to end, a second coder is refused while a Pi coder holds the
//! writer slot, and a Pi child resumed after a broker SIGKILL mid tool call branches from the
//! last completed leaf, keeps the interrupted branch and appends the recovery notice.

use std::time::Duration;

use crate::support;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

const TEMPLATES: &str = r#"
[templates.pi-researcher]
description = "Reads the workspace on Pi"
instructions = "You are a researcher."
tools = ["read", "grep", "find", "ls"]
worker = "pi"

[templates.pi-coder]
description = "Writes and runs commands on Pi"
instructions = "You are a coder."
tools = ["read", "grep", "find", "ls", "write", "edit", "bash"]
worker = "pi"
"#;

/// The Pi worker is installed in the checkout (`npm ci --prefix workers/pi`), else the
/// group is skipped (or fails in strict mode).
fn pi_ready() -> bool {
    let dir = support::prereq::workspace_root().join("workers/pi");
    let ready = dir
        .join("node_modules/@earendil-works/pi-coding-agent/package.json")
        .is_file()
        && dir.join("node_modules/node/bin/node").is_file();
    if ready {
        support::prereq::present("mcp_pi_worker");
    } else {
        support::prereq::missing(
            "mcp_pi_worker",
            "the Pi worker's node_modules",
            "npm ci --prefix workers/pi",
        );
    }
    ready
}

fn env_with_templates(script: Vec<Reply>) -> Env {
    let env = Env::new(script);
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(env.config(), format!("{config}{TEMPLATES}")).expect("config");
    env
}

#[tokio::test(flavor = "multi_thread")]
async fn a_researcher_on_the_pi_worker_completes_a_real_tool_call_and_info_lists_both_workers() {
    if !pi_ready() {
        return;
    }
    let env = env_with_templates(vec![
        Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
        Reply::text("It is a demo project."),
    ]);
    let broker = env.broker("pi-researcher").await;
    let info = ok(&broker, "subzero_info", json!({})).await;
    let workers = info["workers"].as_array().expect("workers");
    let pi = workers
        .iter()
        .find(|w| w["name"] == "pi")
        .expect("pi listed");
    assert_eq!(pi["installed"], true, "{info:#}");
    assert_eq!(pi["capabilities"]["mcpServers"], false);
    assert!(pi["installedBytes"].as_u64().unwrap_or(0) > 1_000_000);
    assert!(
        workers
            .iter()
            .any(|w| w["name"] == "rust" && w["installed"] == true)
    );
    let template = info["templates"]
        .as_array()
        .expect("templates")
        .iter()
        .find(|t| t["templateId"] == "pi-researcher")
        .expect("template");
    assert_eq!(template["worker"], "pi");
    let (child, _) = spawn(&broker, &env, "pi-researcher", "What is this project?").await;
    let done = settle(&broker, &child, Duration::from_secs(60)).await;
    assert_eq!(done["lastRun"]["status"], "completed", "{done:#}");
    assert_eq!(done["lastRun"]["preview"], "It is a demo project.");
    let body = env.server.requests()[1]
        .json()
        .unwrap_or_default()
        .to_string();
    assert!(
        body.contains("A small project for Subzero"),
        "the read tool ran in Pi: {body}"
    );
    broker.close().await.expect("close");
    assert!(
        env.files_containing(KEY).is_empty(),
        "key on disk: {:?}",
        env.files_containing(KEY)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coder_on_the_pi_worker_writes_and_runs_commands_and_holds_the_writer_slot() {
    if !pi_ready() {
        return;
    }
    let env = env_with_templates(vec![
        Reply::tool_call(
            "call_1",
            "write",
            r#"{"path":"out.txt","content":"written by pi\n"}"#,
        ),
        Reply::tool_call("call_2", "bash", r#"{"command":"sleep 2; cat out.txt"}"#),
        Reply::text("Wrote and read out.txt."),
    ]);
    let broker = env.broker("pi-coder").await;
    let (child, _) = spawn(&broker, &env, "pi-coder", "Write out.txt and show it.").await;
    until(&broker, &child, Duration::from_secs(30), |snap| {
        snap["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["type"] == "tool" && e["name"] == "bash"))
    })
    .await;
    // The writer slot is held while the Pi coder runs: a second coder is refused.
    let second = err(
        &broker,
        "subzero_spawn",
        json!({"prompt": "also write", "templateId": "pi-coder", "model": env.model()}),
    )
    .await;
    assert_eq!(second, "workspace_busy");
    let done = settle(&broker, &child, Duration::from_secs(60)).await;
    assert_eq!(done["lastRun"]["status"], "completed", "{done:#}");
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("out.txt")).expect("written"),
        "written by pi\n"
    );
    let body = env.server.requests()[2]
        .json()
        .unwrap_or_default()
        .to_string();
    assert!(
        body.contains("written by pi"),
        "bash ran and saw the file: {body}"
    );
    broker.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_child_resumed_after_a_broker_sigkill_mid_tool_call_branches_from_the_last_leaf() {
    if !pi_ready() {
        return;
    }
    let env = env_with_templates(vec![
        Reply::text("FIRST-ANSWER-61d: the project is a demo"),
        Reply::tool_call("call_1", "bash", r#"{"command":"sleep 300"}"#),
        Reply::text("resumed answer"),
    ]);
    let first = env.broker("pi-first").await;
    let (child, _) = spawn(&first, &env, "pi-coder", "What is this project?").await;
    let done = settle(&first, &child, Duration::from_secs(60)).await;
    assert_eq!(done["lastRun"]["status"], "completed", "{done:#}");
    ok(
        &first,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "INTERRUPTED-PROMPT-2b8: run it"}),
    )
    .await;
    until(&first, &child, Duration::from_secs(30), |snap| {
        snap["events"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["type"] == "tool" && e["name"] == "bash" && e["state"] == "started")
        })
    })
    .await;
    sigkill(first.pid().expect("broker pid"));
    assert!(
        wait_no_workers(&env.workspace(), Duration::from_secs(5)),
        "workers survived their broker: {:?}",
        workers_in(&env.workspace())
    );
    drop(first);
    let second = env.broker("pi-second").await;
    let snap = ok(&second, "subzero_get", json!({"childId": child})).await;
    assert_eq!(snap["state"], "interrupted", "{snap:#}");
    let resumed = ok(
        &second,
        "subzero_resume",
        json!({"childId": child, "model": env.model(), "message": "Continue."}),
    )
    .await;
    assert_eq!(resumed["state"], "running");
    let after = settle(&second, &child, Duration::from_secs(60)).await;
    assert_eq!(after["lastRun"]["status"], "completed", "{after:#}");
    assert_eq!(after["lastRun"]["preview"], "resumed answer");
    let body = env.server.requests()[2]
        .json()
        .unwrap_or_default()
        .to_string();
    assert!(
        body.contains("FIRST-ANSWER-61d") && body.contains("Recovery notice"),
        "{body}"
    );
    assert!(
        !body.contains("INTERRUPTED-PROMPT-2b8"),
        "the interrupted prompt was replayed: {body}"
    );
    let transcript =
        std::fs::read_to_string(env.state_dir().join(format!("transcripts/{child}.jsonl")))
            .expect("transcript");
    assert!(
        transcript.contains("INTERRUPTED-PROMPT-2b8") && transcript.contains("Recovery notice"),
        "the interrupted branch is kept"
    );
    assert!(
        transcript.starts_with("{\"type\":\"session\",\"version\":3"),
        "Pi's session format"
    );
    second.close().await.expect("close");
    assert!(
        env.files_containing(KEY).is_empty(),
        "key on disk: {:?}",
        env.files_containing(KEY)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_template_the_worker_cannot_run_is_refused_before_anything_is_written() {
    if !pi_ready() {
        return;
    }
    let env = env_with_templates(vec![Reply::text("never")]);
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!(
            "{config}\n[templates.pi-mcp]\ndescription = \"MCP on Pi\"\ninstructions = \"x\"\ntools = [\"read\"]\nworker = \"pi\"\n[[templates.pi-mcp.mcp_servers]]\nname = \"fake\"\ncommand = \"/bin/true\"\nallowed_tools = [\"echo\"]\n"
        ),
    )
    .expect("config");
    let broker = env.broker("pi-refused").await;
    let code = err(
        &broker,
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "pi-mcp", "model": env.model()}),
    )
    .await;
    assert_eq!(code, "unsupported_grant");
    let listed = ok(&broker, "subzero_list", json!({})).await;
    assert_eq!(
        listed["children"].as_array().map(Vec::len),
        Some(0),
        "nothing was created"
    );
    assert!(env.server.requests().is_empty(), "no model call");
    broker.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_template_without_the_worker_installed_is_refused_naming_the_fix() {
    let env = env_with_templates(vec![Reply::text("never")]);
    let config = std::fs::read_to_string(env.config()).expect("config");
    let missing = env.dir.path().join("no-pi-here");
    std::fs::write(
        env.config(),
        format!("{config}\n[workers.pi]\ndir = \"{}\"\n", missing.display()),
    )
    .expect("config");
    let broker = env.broker("pi-missing").await;
    let reply = call(
        &broker,
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "pi-researcher", "model": env.model()}),
    )
    .await;
    let info = ok(&broker, "subzero_info", json!({})).await;
    assert!(
        reply.is_error,
        "{} / {}",
        reply.text, info["configProblems"]
    );
    assert_eq!(reply.code(), Some("worker_incompatible"), "{}", reply.text);
    assert!(reply.text.contains("npm ci --prefix"), "{}", reply.text);
    let pi = info["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["name"] == "pi")
        .cloned()
        .expect("pi");
    assert_eq!(pi["installed"], false);
    assert!(
        pi["problem"].as_str().unwrap_or("").contains("npm ci"),
        "{pi}"
    );
    // The Rust worker's templates are unaffected.
    let (child, _) = spawn(&broker, &env, "researcher", "hello").await;
    let done = settle(&broker, &child, Duration::from_secs(30)).await;
    assert_eq!(done["lastRun"]["status"], "completed");
    broker.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_childs_receipts_say_that_node_is_confined_as_a_tool_and_bash_nested() {
    if !pi_ready() {
        return;
    }
    let env = env_with_templates(vec![Reply::text("Pi answer."), Reply::text("Rust answer.")]);
    let broker = env.broker("pi-receipts").await;
    let info = ok(&broker, "subzero_info", json!({})).await;
    let workers = info["workers"].as_array().expect("workers");
    let pi = workers.iter().find(|w| w["name"] == "pi").expect("pi");
    let rust = workers.iter().find(|w| w["name"] == "rust").expect("rust");
    let landlock = info["enforcement"]["landlock"].as_u64().is_some();
    let receipt = &pi["containment"]["worker"];
    assert_eq!(receipt["name"], "pi", "{info:#}");
    assert_eq!(receipt["keyHolderConfined"], true, "{info:#}");
    assert_eq!(receipt["nestedCommands"], landlock, "{info:#}");
    assert!(
        receipt["summary"].as_str().unwrap_or("").contains("Node"),
        "{receipt}"
    );
    assert!(
        pi["containment"]["view"]["summary"]
            .as_str()
            .unwrap_or("")
            .starts_with("Node and its tools: "),
        "{info:#}"
    );
    assert!(
        rust.get("containment").is_none(),
        "the Rust worker's receipts are enforcement.containment: {rust}"
    );
    assert!(
        info["enforcement"]["containment"].get("worker").is_none(),
        "{info:#}"
    );

    let (child, _) = spawn(&broker, &env, "pi-coder", "Say something.").await;
    let done = settle(&broker, &child, Duration::from_secs(60)).await;
    assert_eq!(done["lastRun"]["status"], "completed", "{done:#}");
    let containment = &done["containment"];
    assert_eq!(containment["worker"], *receipt, "{done:#}");
    assert!(
        containment["view"]["summary"]
            .as_str()
            .unwrap_or("")
            .starts_with("Node and its tools: "),
        "{done:#}"
    );
    if landlock {
        assert_eq!(containment["filesystem"]["enforced"], true, "{done:#}");
        assert!(
            containment["filesystem"]["summary"]
                .as_str()
                .unwrap_or("")
                .ends_with(" workspace"),
            "{done:#}"
        );
    }

    let (rust_child, _) = spawn(&broker, &env, "researcher", "Say something.").await;
    let done = settle(&broker, &rust_child, Duration::from_secs(60)).await;
    assert_eq!(done["lastRun"]["status"], "completed", "{done:#}");
    assert!(
        done["containment"].get("worker").is_none(),
        "a Rust child has no worker receipt: {done:#}"
    );
    assert!(
        !done["containment"]["view"]["summary"]
            .as_str()
            .unwrap_or("")
            .contains("Node"),
        "{done:#}"
    );
    broker.close().await.expect("close");
}
