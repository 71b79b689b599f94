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
pub(crate) fn pi_ready() -> bool {
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
    let info = broker_info(&broker).await;
    let pi = worker_named(&info, "pi");
    assert!(pi.installed, "{info:#?}");
    assert_eq!(pi.capabilities.as_ref().map(|c| c.mcp_servers), Some(false));
    assert!(pi.installed_bytes.unwrap_or(0) > 1_000_000);
    assert!(worker_named(&info, "rust").installed);
    let template = template_named(&info, "pi-researcher");
    assert_eq!(
        template.worker.as_ref().map(|w| w.to_string()).as_deref(),
        Some("pi")
    );
    let (child, _) = spawn(&broker, &env, "pi-researcher", "What is this project?").await;
    let done = settled(&broker, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    assert_eq!(last(&done).preview.as_str(), "It is a demo project.");
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
    until_snap(&broker, &child, Duration::from_secs(30), |snap| {
        has_tool_event(snap, "bash", None)
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
    let done = settled(&broker, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
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
    let done = settled(&first, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    send(
        &first,
        json!({"childId": child, "mode": "followup", "message": "INTERRUPTED-PROMPT-2b8: run it"}),
    )
    .await;
    until_snap(&first, &child, Duration::from_secs(30), |snap| {
        has_tool_event(snap, "bash", Some(p::ToolState::Started))
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
    let snap = get(&second, json!({"childId": child})).await;
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");
    let resumed = resume(
        &second,
        json!({"childId": child, "model": env.model(), "message": "Continue."}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running);
    let after = settled(&second, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&after),
        Some(p::TerminalRunStatus::Completed),
        "{after:#?}"
    );
    assert_eq!(last(&after).preview.as_str(), "resumed answer");
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
    let listed = list(&broker, json!({})).await;
    assert!(listed.children.is_empty(), "nothing was created");
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
    let info = broker_info(&broker).await;
    assert!(
        reply.is_error,
        "{} / {}",
        reply.text,
        json!(info.config_problems)
    );
    assert_eq!(reply.code(), Some("worker_incompatible"), "{}", reply.text);
    assert!(reply.text.contains("npm ci --prefix"), "{}", reply.text);
    let pi = worker_named(&info, "pi");
    assert!(!pi.installed);
    assert!(
        pi.problem.as_deref().is_some_and(|p| p.contains("npm ci")),
        "{pi:#?}"
    );
    // The Rust worker's templates are unaffected.
    let (child, _) = spawn(&broker, &env, "researcher", "hello").await;
    let done = settled(&broker, &child, Duration::from_secs(30)).await;
    assert_eq!(last_status(&done), Some(p::TerminalRunStatus::Completed));
    broker.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_childs_receipts_say_that_node_is_confined_as_a_tool_and_bash_nested() {
    if !pi_ready() {
        return;
    }
    let env = env_with_templates(vec![Reply::text("Pi answer."), Reply::text("Rust answer.")]);
    let broker = env.broker("pi-receipts").await;
    let info = broker_info(&broker).await;
    let pi = worker_named(&info, "pi");
    let rust = worker_named(&info, "rust");
    let landlock = info.enforcement.landlock.is_some();
    let pi_containment = pi.containment.as_ref().expect("pi's receipts");
    let receipt = pi_containment.worker.as_ref().expect("pi's worker receipt");
    assert_eq!(receipt.name.to_string(), "pi", "{info:#?}");
    assert!(receipt.key_holder_confined, "{info:#?}");
    assert_eq!(receipt.nested_commands, landlock, "{info:#?}");
    assert!(receipt.summary.contains("Node"), "{receipt:#?}");
    assert!(
        pi_containment
            .view
            .as_ref()
            .is_some_and(|v| v.summary.starts_with("Node and its tools: ")),
        "{info:#?}"
    );
    assert!(
        rust.containment.is_none(),
        "the Rust worker's receipts are enforcement.containment: {rust:#?}"
    );
    assert!(
        info.enforcement
            .containment
            .as_ref()
            .is_none_or(|c| c.worker.is_none()),
        "{info:#?}"
    );

    let (child, _) = spawn(&broker, &env, "pi-coder", "Say something.").await;
    let done = settled(&broker, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    let done = receipts(&broker, &child).await;
    let containment = done.containment.as_ref().expect("containment");
    assert_eq!(containment.worker.as_ref(), Some(receipt), "{done:#?}");
    assert!(
        containment
            .view
            .as_ref()
            .is_some_and(|v| v.summary.starts_with("Node and its tools: ")),
        "{done:#?}"
    );
    if landlock {
        let filesystem = containment.filesystem.as_ref().expect("filesystem");
        assert!(filesystem.enforced, "{done:#?}");
        assert!(filesystem.summary.ends_with(" workspace"), "{done:#?}");
    }

    let (rust_child, _) = spawn(&broker, &env, "researcher", "Say something.").await;
    let done = settled(&broker, &rust_child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    let containment = done.containment.as_ref();
    assert!(
        containment.is_none_or(|c| c.worker.is_none()),
        "a Rust child has no worker receipt: {done:#?}"
    );
    assert!(
        !containment
            .and_then(|c| c.view.as_ref())
            .is_some_and(|v| v.summary.contains("Node")),
        "{done:#?}"
    );
    broker.close().await.expect("close");
}
