//! What an isolated child may not do, and what cannot be isolated: each refused with its
//! typed code, nothing stored, nothing written where it must not be.

use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_writing_the_main_checkout_gets_eacces_and_the_receipt_names_the_checkout() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let ws = g.workspace();
    let escape = ws.join("escaped.txt");
    let git_dir = ws.join(".git/refs/heads/hijacked");
    let plan = format!(
        "PLAN bash echo out > {} ; echo ref > {} ; echo in > inside.txt",
        escape.display(),
        git_dir.display()
    );
    let child = g.isolated_coder(&s, &plan).await;
    let snap = settled_child(&s, &child).await;
    assert!(!escape.exists(), "the main checkout was written");
    assert!(!git_dir.exists(), "the workspace's refs were written");
    let co = checkout(&snap);
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&co.path).join("inside.txt"))
            .expect("the child writes its checkout"),
        "in\n"
    );
    let snap = crate::support::mcp::receipts(&s, &child).await;
    let fs = snap
        .containment
        .as_ref()
        .and_then(|c| c.filesystem.as_ref())
        .expect("a filesystem receipt");
    assert!(
        fs.enforced,
        "these tests need a kernel with Landlock: {fs:#?}"
    );
    assert!(
        fs.summary.contains("writes only its checkout") && fs.summary.contains(&co.path),
        "{fs:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_that_is_not_a_repository_is_not_isolatable_and_nothing_is_stored() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    std::fs::remove_dir_all(g.workspace().join(".git")).expect("no longer a repository");
    let reply = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN none", "templateId": "coder", "model": g.model_arg(), "isolation": "checkout"}),
    )
    .await;
    assert_eq!(reply.code(), Some("not_isolatable"), "{}", reply.text);
    assert!(reply.text.contains("git"), "{}", reply.text);
    assert!(list(&s, json!({})).await.children.is_empty());
    assert_eq!(g.model.served(), 0, "refused before any model call");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_base_revision_and_a_base_without_isolation_are_refused() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let bad = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN none", "templateId": "coder", "model": g.model_arg(),
               "isolation": "checkout", "baseRevision": "no-such-branch"}),
    )
    .await;
    assert_eq!(bad.code(), Some("not_isolatable"), "{}", bad.text);
    assert!(bad.text.contains("no-such-branch"), "{}", bad.text);
    let shared = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN none", "templateId": "coder", "model": g.model_arg(),
               "baseRevision": "main"}),
    )
    .await;
    assert_eq!(shared.code(), Some("invalid_request"), "{}", shared.text);
    assert!(list(&s, json!({})).await.children.is_empty());
    // Nothing was left on disk either.
    let checkouts = g.env.dir.path().join("state-checkouts");
    let left = std::fs::read_dir(&checkouts).map_or(0, |d| d.count());
    assert_eq!(left, 0, "a refused spawn left a checkout");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shared_child_has_no_change_to_apply() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let out: p::SpawnOutput = typed(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN none", "templateId": "coder", "model": g.model_arg()}),
    )
    .await;
    let child = out.child_id.to_string();
    let snap = settled_child(&s, &child).await;
    assert!(snap.checkout.is_none(), "{snap:#?}");
    let reply = apply(&s, json!({"childId": child})).await;
    assert_eq!(reply.code(), Some("change_unavailable"), "{}", reply.text);
    s.close().await.expect("close");
}
