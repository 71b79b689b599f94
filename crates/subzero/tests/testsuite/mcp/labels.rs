//! Labelled children: a spawn's label (or its prompt's first line, secrets redacted, cut to
//! 64 characters) is what `get` and `list` show, and `list` finds children by label,
//! template and state.

use std::time::Duration;

use serde_json::json;
use subzero_testkit::Reply;

use crate::support::mcp::*;

async fn spawn_labelled(
    s: &subzero_testkit::mcp_client::McpSession,
    env: &Env,
    template: &str,
    prompt: &str,
    label: Option<&str>,
) -> String {
    let mut args = json!({"prompt": prompt, "templateId": template, "model": env.model()});
    if let Some(label) = label {
        args["label"] = json!(label);
    }
    let out: p::SpawnOutput = typed(s, "subzero_spawn", args).await;
    out.child_id.to_string()
}

fn labels(list: &p::ListOutput) -> Vec<String> {
    list.children
        .iter()
        .map(|c| c.label.as_ref().map(|l| l.to_string()).unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_label_names_the_child_in_get_and_list_and_list_finds_children_by_it() {
    let env = Env::new((0..3).map(|_| Reply::text("done")).collect());
    let s = env.broker("labels").await;
    let named = spawn_labelled(&s, &env, "researcher", "Look around.", Some("Auth review")).await;
    // No label: the first line with text, the key redacted, cut to 64 characters.
    let prompt = format!(
        "\n   \nFix the login bug; the key {KEY} must not show; {}\nthen report",
        "x".repeat(80)
    );
    let derived = spawn_labelled(&s, &env, "coder", &prompt, None).await;
    let third = spawn_labelled(&s, &env, "researcher", "Map the auth module", None).await;
    for child in [&named, &derived, &third] {
        settled(&s, child, Duration::from_secs(30)).await;
    }
    assert_eq!(
        snapshot(&s, &named)
            .await
            .label
            .map(|l| l.to_string())
            .as_deref(),
        Some("Auth review")
    );
    let label = snapshot(&s, &derived)
        .await
        .label
        .expect("a derived label")
        .to_string();
    assert!(!label.contains(KEY), "{label}");
    assert!(
        label.starts_with("Fix the login bug; the key [redacted] must not show; xx"),
        "{label}"
    );
    assert_eq!(label.chars().count(), 64, "{label}");

    let all = list(&s, json!({})).await;
    assert_eq!(all.children.len(), 3);
    let found = list(&s, json!({"label": "AUTH"})).await;
    assert_eq!(labels(&found), ["Auth review", "Map the auth module"]);
    let coders = list(&s, json!({"templateId": "coder"})).await;
    assert_eq!(coders.children.len(), 1);
    assert_eq!(coders.children[0].child_id.as_str(), derived);
    let ready = list(&s, json!({"state": "ready", "label": "map"})).await;
    assert_eq!(labels(&ready), ["Map the auth module"]);
    let running = list(&s, json!({"state": "running"})).await;
    assert!(running.children.is_empty(), "{running:#?}");
    // Paging still works through a filter.
    let first = list(&s, json!({"label": "a", "limit": 1})).await;
    let after = first.next_after.expect("a second page");
    let second = list(&s, json!({"label": "a", "limit": 1, "after": after})).await;
    assert_eq!(second.children.len(), 1);
    assert_ne!(second.children[0].child_id, first.children[0].child_id);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_label_with_control_characters_or_over_64_characters_is_refused() {
    let env = Env::new(Vec::new());
    let s = env.broker("bad-labels").await;
    for label in ["\u{1b}]52;c;aGk=\u{7}", "", &"y".repeat(65)] {
        let reply = call(
            &s,
            "subzero_spawn",
            json!({"prompt": "hi", "templateId": "researcher", "model": env.model(), "label": label}),
        )
        .await;
        assert_eq!(
            reply.code(),
            Some("invalid_request"),
            "{label:?}: {}",
            reply.text
        );
    }
    assert!(list(&s, json!({})).await.children.is_empty());
    s.close().await.expect("close");
}
