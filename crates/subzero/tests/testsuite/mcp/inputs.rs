//! Bad input through MCP: every one is a tool error with a stable code and a message
//! naming what to fix — never a JSON-RPC protocol error, never a state change.

use crate::support::mcp::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_typed_tool_errors_naming_the_field() {
    let env = Env::new(vec![]);
    let s = env.broker("broker").await;

    // Missing and malformed arguments: invalid_request naming the field.
    let missing = call(
        &s,
        "subzero_spawn",
        json!({"templateId": "researcher", "model": env.model()}),
    )
    .await;
    assert_eq!(missing.code(), Some("invalid_request"));
    assert!(missing.text.contains("prompt"), "{}", missing.text);
    assert_eq!(missing.structured["details"]["field"], "prompt");

    let nested = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "x", "templateId": "researcher", "model": {"url": env.server.base_url(), "model": "m"}}),
    )
    .await;
    assert_eq!(nested.code(), Some("invalid_request"));
    assert!(
        nested.text.contains("model.credentialRef"),
        "{}",
        nested.text
    );

    let wrong_type = call(&s, "subzero_get", json!({"childId": 42})).await;
    assert_eq!(wrong_type.code(), Some("invalid_request"));
    assert!(wrong_type.text.contains("childId"), "{}", wrong_type.text);

    let out_of_bounds = call(
        &s,
        "subzero_get",
        json!({"childId": format!("ch_{}", "0".repeat(26)), "waitMs": 30001}),
    )
    .await;
    assert_eq!(out_of_bounds.code(), Some("invalid_request"));
    assert!(
        out_of_bounds.text.contains("waitMs"),
        "{}",
        out_of_bounds.text
    );

    let unknown_field = call(&s, "subzero_list", json!({"bogus": true})).await;
    assert_eq!(unknown_field.code(), Some("invalid_request"));
    assert!(
        unknown_field.text.contains("bogus"),
        "{}",
        unknown_field.text
    );

    // A malformed id is invalid_request; a well-formed unknown one is not_found.
    assert_eq!(
        err(&s, "subzero_get", json!({"childId": "ch_nope"})).await,
        "invalid_request"
    );
    assert_eq!(
        err(
            &s,
            "subzero_get",
            json!({"childId": format!("ch_{}", "0".repeat(26))})
        )
        .await,
        "not_found"
    );
    assert_eq!(
        err(
            &s,
            "subzero_output",
            json!({"artifactId": format!("art_{}", "0".repeat(26))})
        )
        .await,
        "not_found"
    );

    // Policy and catalogue errors.
    let big = "x".repeat(65 * 1024);
    let oversize = call(
        &s,
        "subzero_spawn",
        json!({"prompt": big, "templateId": "researcher", "model": env.model()}),
    )
    .await;
    // The prompt limit is the policy's, in bytes, whatever the characters.
    assert_eq!(oversize.code(), Some("limit_exceeded"), "{}", oversize.text);
    let just_over_bytes = "é".repeat(33 * 1024); // 66 KiB of UTF-8 in 33 Ki characters
    assert_eq!(
        err(
            &s,
            "subzero_spawn",
            json!({"prompt": just_over_bytes, "templateId": "researcher", "model": env.model()})
        )
        .await,
        "limit_exceeded"
    );
    assert_eq!(
        err(
            &s,
            "subzero_spawn",
            json!({"prompt": "x", "templateId": "no-such-template", "model": env.model()})
        )
        .await,
        "template_not_found"
    );
    let unknown_ref = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "x", "templateId": "researcher", "model": {"url": env.server.base_url(), "model": "m", "credentialRef": "missing"}}),
    )
    .await;
    assert_eq!(unknown_ref.code(), Some("credentials_required"));
    assert!(unknown_ref.text.contains("missing"), "{}", unknown_ref.text);
    let wrong_origin = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "x", "templateId": "researcher", "model": {"url": "https://example.invalid/v1", "model": "m", "credentialRef": CRED}}),
    )
    .await;
    assert_eq!(wrong_origin.code(), Some("credentials_required"));

    // Unknown tool names are tool errors too.
    let unknown_tool = call(&s, "subzero_delete", json!({})).await;
    assert!(unknown_tool.is_error);

    // None of it created a child or reached the model.
    let listed = list(&s, json!({})).await;
    assert!(listed.children.is_empty());
    assert!(env.server.requests().is_empty());
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_request_id_returns_the_same_receipt_and_a_changed_one_conflicts() {
    let env = Env::new(vec![subzero_testkit::Reply::text("done")]);
    let s = env.broker("broker").await;
    let args = json!({"prompt": "once", "templateId": "researcher", "model": env.model(), "requestId": "spawn-1"});
    let first = typed::<p::SpawnOutput>(&s, "subzero_spawn", args.clone()).await;
    let second = typed::<p::SpawnOutput>(&s, "subzero_spawn", args).await;
    assert_eq!(first, second);
    let conflict = json!({"prompt": "twice", "templateId": "researcher", "model": env.model(), "requestId": "spawn-1"});
    assert_eq!(err(&s, "subzero_spawn", conflict).await, "request_conflict");
    let listed = list(&s, json!({})).await;
    assert_eq!(Some(listed.children.len()), Some(1));
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn user_templates_from_the_config_are_listed_spawned_and_checked() {
    let env = Env::new(vec![subzero_testkit::Reply::text("reviewed")]);
    std::fs::write(
        env.config(),
        format!(
            "[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{}\"]\n\n\
             [templates.reviewer]\ndescription = \"Reads and reviews\"\ninstructions = \"Review.\"\ntools = [\"read\", \"grep\"]\n\n\
             [templates.styled]\ndescription = \"Needs a skill file that is missing\"\ninstructions = \"x\"\ntools = [\"read\"]\nskills = [{{ name = \"style\", path = \"missing-style.md\" }}]\n",
            env.origin()
        ),
    )
    .expect("config");
    let s = env.broker("broker").await;
    let info = broker_info(&s).await;
    let reviewer = template_named(&info, "reviewer");
    assert_eq!(json!(reviewer.tools), json!(["read", "grep"]));
    assert!(!reviewer.builtin);
    let (child, _) = spawn(&s, &env, "reviewer", "review").await;
    let snap = settled(&s, &child, std::time::Duration::from_secs(30)).await;
    assert_eq!(last(&snap).preview.as_str(), "reviewed");
    let declared = env.server.requests()[0].tool_names();
    assert_eq!(declared, vec!["read", "grep"]);
    let refused = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "x", "templateId": "styled", "model": env.model()}),
    )
    .await;
    assert_eq!(
        refused.code(),
        Some("unsupported_grant"),
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains("missing-style.md"),
        "{}",
        refused.text
    );
    s.close().await.expect("close");
}
