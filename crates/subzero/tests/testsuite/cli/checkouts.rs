//! Isolated checkouts as the command line shows and collects them, on state made by a real
//! broker (which keeps running beside): `subzero gc` removes what finished checkouts left
//! behind and never an unapplied change; `subzero doctor` counts and measures checkouts and
//! names directories the ledger does not know; `subzero ls` and `watch` show each isolated
//! child's change.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::json;
use subzero_testkit::mcp_client::McpSession;

use crate::isolation::support::*;
use crate::support::cli::*;

/// `subzero ARGS --state-dir … --config …` run to completion; fails the test on a non-zero exit.
fn run(g: &GitEnv, args: &[&str]) -> String {
    let out: Output = subzero()
        .args(args)
        .arg("--state-dir")
        .arg(g.env.state_dir())
        .args(if args[0] == "ls" {
            vec![]
        } else {
            vec!["--config".into(), g.env.config()]
        })
        .output()
        .expect("subzero runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
    stdout
}

/// Every `refs/subzero/…` ref of the workspace's repository, sorted.
fn subzero_refs(ws: &Path) -> Vec<String> {
    let listed = git(ws, &["for-each-ref", "--format=%(refname)", "refs/subzero"]);
    let mut refs: Vec<String> = listed.lines().map(str::to_owned).collect();
    refs.sort();
    refs
}

/// The checkout directory of a settled isolated child.
async fn checkout_dir(s: &McpSession, child: &str) -> PathBuf {
    PathBuf::from(&checkout(&snapshot(s, child).await).path)
}

/// The broker's `.own` notes on `child`'s checkout.
fn notes(g: &GitEnv, child: &str) -> PathBuf {
    g.env
        .state_dir()
        .join("checkouts")
        .join(format!("{child}.own"))
}

async fn checkout_state(s: &McpSession, child: &str) -> p::CheckoutState {
    checkout(&snapshot(s, child).await).state
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_removes_what_finished_checkouts_left_and_keeps_an_unapplied_change() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let ws = g.workspace();
    let applied = g.isolated_coder(&s, "PLAN write a.txt applied\\n").await;
    let discarded = g.isolated_coder(&s, "PLAN write b.txt discarded\\n").await;
    let unchanged = g.isolated_coder(&s, "PLAN none").await;
    let kept = g.isolated_coder(&s, "PLAN write d.txt kept\\n").await;
    for child in [&applied, &discarded, &unchanged, &kept] {
        settled_child(&s, child).await;
    }
    assert_eq!(
        checkout_state(&s, &unchanged).await,
        p::CheckoutState::SettledUnchanged
    );
    let (unchanged_dir, kept_dir) = (
        checkout_dir(&s, &unchanged).await,
        checkout_dir(&s, &kept).await,
    );
    let discarded_dir = kept_dir.with_file_name(&discarded);
    let landed = apply(&s, json!({"childId": applied})).await;
    assert!(!landed.is_error, "{}", landed.text);
    let thrown = apply(&s, json!({"childId": discarded, "discard": true})).await;
    assert!(!thrown.is_error, "{}", thrown.text);
    // A broker that died between writing `discarded` and removing the checkout left it all.
    std::fs::create_dir_all(&discarded_dir).expect("leftover dir");
    std::fs::write(discarded_dir.join("left.txt"), vec![b'x'; 64 << 10]).expect("leftover");
    git(
        &ws,
        &[
            "update-ref",
            &format!("refs/subzero/children/{discarded}"),
            "HEAD",
        ],
    );
    assert!(notes(&g, &unchanged).exists() && unchanged_dir.exists());
    let refs_before = subzero_refs(&ws);
    for child in [&applied, &discarded, &unchanged, &kept] {
        assert!(
            refs_before.iter().any(|r| r.ends_with(child.as_str())),
            "{child}: {refs_before:?}"
        );
    }

    // Within keep_days (7 by default) nothing is old enough.
    let young = run(&g, &["gc"]);
    assert!(young.contains("nothing to collect"), "{young}");
    assert!(young.contains("kept: 1 with unapplied changes"), "{young}");
    assert!(young.contains("3 changed within 7 days"), "{young}");

    // The dry run lists the three finished checkouts, touches nothing.
    let dry = run(&g, &["gc", "--older-than", "0"]);
    for child in [&applied, &discarded, &unchanged] {
        assert!(dry.contains(child.as_str()), "{child} not listed:\n{dry}");
    }
    assert!(!dry.contains(kept.as_str()), "{dry}");
    assert!(dry.contains("would remove 3 checkout(s)"), "{dry}");
    assert!(dry.contains("no change → removed"), "{dry}");
    assert!(dry.contains("kept: 1 with unapplied changes"), "{dry}");
    assert_eq!(subzero_refs(&ws), refs_before);
    assert!(unchanged_dir.exists() && discarded_dir.exists() && notes(&g, &unchanged).exists());
    assert_eq!(
        checkout_state(&s, &unchanged).await,
        p::CheckoutState::SettledUnchanged
    );

    // Applied, beside the running broker.
    let done = run(&g, &["gc", "--apply", "--older-than", "0"]);
    assert!(done.contains("removed 3 of 3 checkout(s)"), "{done}");
    let kept_refs = vec![
        format!("refs/subzero/base/{kept}"),
        format!("refs/subzero/children/{kept}"),
    ];
    assert_eq!(subzero_refs(&ws), kept_refs, "{done}");
    assert!(!unchanged_dir.exists() && !discarded_dir.exists() && !notes(&g, &unchanged).exists());
    assert!(kept_dir.join("d.txt").exists() && notes(&g, &kept).exists());
    assert_eq!(
        checkout_state(&s, &unchanged).await,
        p::CheckoutState::Removed
    );
    assert_eq!(
        checkout_state(&s, &applied).await,
        p::CheckoutState::Applied
    );
    assert_eq!(
        checkout_state(&s, &discarded).await,
        p::CheckoutState::Discarded
    );
    assert_eq!(
        checkout_state(&s, &kept).await,
        p::CheckoutState::SettledChanged
    );

    // Nothing is left to collect the second time.
    let again = run(&g, &["gc", "--apply", "--older-than", "0"]);
    assert!(again.contains("nothing to collect"), "{again}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_measures_checkouts_and_names_an_orphan_and_ls_shows_the_change() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let isolated = g.isolated_coder(&s, "PLAN write a.txt one\\ntwo\\n").await;
    let snap = settled_child(&s, &isolated).await;
    let change = checkout(&snap).change.as_ref().expect("a change");
    assert_eq!(
        (change.insertions, change.deletions, change.files_changed),
        (2, 0, 1)
    );
    let shared: p::SpawnOutput = typed(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN none", "templateId": "coder", "model": g.model_arg()}),
    )
    .await;
    let shared = shared.child_id.to_string();
    settled_child(&s, &shared).await;

    // `ls` (tab-separated to a pipe): CHANGE is the eighth column, empty for a shared child.
    let listing = run(&g, &["ls"]);
    let change_of = |child: &str| -> String {
        let line = listing.lines().find(|l| l.starts_with(child));
        let line = line.unwrap_or_else(|| panic!("{child} not listed:\n{listing}"));
        line.split('\t').nth(7).unwrap_or_default().to_owned()
    };
    assert_eq!(
        change_of(&isolated),
        "+2 −0 in 1 file, settled",
        "{listing}"
    );
    assert_eq!(change_of(&shared), "", "{listing}");
    let wide = subzero()
        .args(["watch", "--workspace"])
        .arg(g.workspace())
        .arg("--state-dir")
        .arg(g.env.state_dir())
        .env("COLUMNS", "160")
        .output()
        .expect("watch runs");
    let board = String::from_utf8_lossy(&wide.stdout);
    assert!(
        board.contains("CHANGE") && board.contains("+2 −0 in 1"),
        "{board}"
    );

    // On disk: the checkout grew after the ledger last measured it; a directory nobody knows.
    let dir = checkout_dir(&s, &isolated).await;
    std::fs::write(dir.join("ignored.bin"), vec![b'x'; 256 << 10]).expect("big file");
    let orphan = dir.with_file_name("ch_orphan");
    std::fs::create_dir_all(&orphan).expect("orphan");
    std::fs::write(orphan.join("left.bin"), vec![b'y'; 64 << 10]).expect("orphan file");
    let (_, report) = doctor(&g.env.state_dir(), &g.env.config(), &[], &[]);
    let summary = checks(&report, "checkouts");
    assert_eq!(summary.len(), 1, "{report:#?}");
    assert_eq!(summary[0].status, Status::Pass, "{report:#?}");
    assert!(
        summary[0]
            .detail
            .starts_with("1 checkout(s): 1 settled_changed; 1 directory on disk"),
        "{report:#?}"
    );
    assert!(bytes_in(&summary[0].detail) >= 256 << 10, "{report:#?}");
    let orphans = checks(&report, "checkout orphan");
    assert_eq!(orphans.len(), 1, "{report:#?}");
    assert_eq!(orphans[0].status, Status::Warn);
    assert!(
        orphans[0].detail.contains(&orphan.display().to_string()),
        "{report:#?}"
    );
    assert!(bytes_in(&orphans[0].detail) >= 64 << 10, "{report:#?}");
    let fix = orphans[0].fix.as_deref().unwrap_or_default();
    assert!(
        fix.contains(&format!("rm -rf {}", orphan.display())),
        "{fix}"
    );
    s.close().await.expect("close");
}

/// The `N` of the `(N bytes)` a detail ends with.
fn bytes_in(detail: &str) -> u64 {
    let open = detail.rfind('(').expect("a byte count");
    let number = detail[open + 1..].split(' ').next().unwrap_or_default();
    number
        .parse()
        .unwrap_or_else(|_| panic!("no byte count in {detail}"))
}
