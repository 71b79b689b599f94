//! Four coders write the same file at once, each in its own checkout; the first change
//! lands, the second is a typed conflict that leaves the workspace byte-identical, and
//! nothing any child made is lost.

use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn four_coders_write_one_file_at_once_and_their_changes_land_one_at_a_time() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let ws = g.workspace();

    // All four at once: isolated coders take no writer slot of the workspace.
    let mut children = Vec::new();
    for i in 0..4 {
        let plan = format!("PLAN write shared.txt from coder {i}\\n");
        children.push(g.isolated_coder(&s, &plan).await);
    }
    let mut snaps = Vec::new();
    for child in &children {
        snaps.push(settled_child(&s, child).await);
    }
    for (i, snap) in snaps.iter().enumerate() {
        let co = checkout(snap);
        assert_eq!(co.state, p::CheckoutState::SettledChanged, "{snap:#?}");
        let change = co.change.as_ref().expect("a recorded change");
        assert_eq!(change.files_changed, 1, "{snap:#?}");
        // The child wrote only its checkout.
        let written = std::fs::read_to_string(std::path::Path::new(&co.path).join("shared.txt"))
            .expect("the checkout's file");
        assert_eq!(written, format!("from coder {i}\n"));
        let diff = read_output(&s, json!({"artifactId": change.diff_artifact_id})).await;
        assert!(
            diff.text.contains(&format!("+from coder {i}")),
            "{}",
            diff.text.as_str()
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("shared.txt")).expect("workspace file"),
        "one\ntwo\nthree\n",
        "no coder wrote the workspace itself"
    );

    // The first lands as uncommitted edits, and its checkout goes.
    let first = apply(&s, json!({"childId": children[0]})).await;
    assert!(!first.is_error, "{}", first.text);
    let out: p::ApplyOutput = parse("subzero_apply", &first.structured);
    assert_eq!(out.state, p::CheckoutState::Applied);
    assert_eq!(out.files_changed, 1);
    assert_eq!(
        std::fs::read_to_string(ws.join("shared.txt")).expect("workspace file"),
        "from coder 0\n"
    );
    assert!(!std::path::Path::new(&checkout(&snaps[0]).path).exists());

    // The second conflicts with those uncommitted edits: refused, the workspace unchanged.
    let before = fingerprint(&ws);
    let second = apply(&s, json!({"childId": children[1]})).await;
    assert!(second.is_error, "{}", second.text);
    assert_eq!(second.code(), Some("change_conflict"), "{}", second.text);
    let conflicts = &second.structured["details"]["conflicts"];
    assert_eq!(conflicts[0]["path"], "shared.txt", "{}", second.text);
    assert_eq!(
        conflicts[0]["reason"], "uncommitted_changes",
        "{}",
        second.text
    );
    let after = fingerprint(&ws);
    assert!(
        before == after,
        "a refused apply changed the workspace: {:?}",
        differences(&before, &after)
    );

    // Committed, the same file is edited on both sides: still all or nothing.
    git(&ws, &["commit", "-q", "-am", "coder 0"]);
    let before = fingerprint(&ws);
    let third = apply(
        &s,
        json!({"childId": children[2], "commitMessage": "coder 2"}),
    )
    .await;
    assert_eq!(third.code(), Some("change_conflict"), "{}", third.text);
    assert_eq!(
        third.structured["details"]["conflicts"][0]["reason"], "edited_on_both_sides",
        "{}",
        third.text
    );
    let after = fingerprint(&ws);
    assert!(
        before == after,
        "a refused apply changed the workspace: {:?}",
        differences(&before, &after)
    );

    // Applying twice is refused; a refused change is still there to discard.
    let again = apply(&s, json!({"childId": children[0]})).await;
    assert_eq!(again.code(), Some("change_unavailable"), "{}", again.text);
    let discarded = apply(&s, json!({"childId": children[1], "discard": true})).await;
    assert!(!discarded.is_error, "{}", discarded.text);
    let out: p::ApplyOutput = parse("subzero_apply", &discarded.structured);
    assert_eq!(out.state, p::CheckoutState::Discarded);
    assert!(!std::path::Path::new(&checkout(&snaps[1]).path).exists());
    let snap = snapshot(&s, &children[1]).await;
    assert_eq!(checkout(&snap).state, p::CheckoutState::Discarded);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coder_that_only_creates_files_is_not_lost_and_lands_as_a_commit() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let ws = g.workspace();
    // The workspace has uncommitted work of its own: it is carried into the checkout.
    std::fs::write(ws.join("notes.md"), "mine\n").expect("notes");
    let child = g
        .isolated_coder(&s, "PLAN write new/dir/made.txt made by the child\\n")
        .await;
    let snap = settled_child(&s, &child).await;
    let co = checkout(&snap);
    assert!(co.dirty && co.carried, "{co:#?}");
    assert!(std::path::Path::new(&co.path).join("notes.md").exists());
    let change = co.change.as_ref().expect("a new file is a change");
    assert_eq!((change.files_changed, change.insertions), (1, 1), "{co:#?}");

    let landed = apply(
        &s,
        json!({"childId": child, "commitMessage": "made by a child"}),
    )
    .await;
    assert!(!landed.is_error, "{}", landed.text);
    let out: p::ApplyOutput = parse("subzero_apply", &landed.structured);
    let commit = out.commit.expect("a commit was made");
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]).trim(), commit.as_str());
    assert_eq!(
        std::fs::read_to_string(ws.join("new/dir/made.txt")).expect("landed"),
        "made by the child\n"
    );
    // The user's own uncommitted file is theirs still: not part of the commit.
    assert_eq!(git(&ws, &["status", "--porcelain"]).trim(), "?? notes.md");
    s.close().await.expect("close");
}
