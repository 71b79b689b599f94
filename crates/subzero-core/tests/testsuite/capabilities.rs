//! The capabilities are taken once, by the code that owns them, and lent only to the code
//! that observes the evidence.
//!
//! The core hands out its minting authority ([`Supervisor::take`]) and the store's key
//! ([`StorageKey::take`]) once per process, to their first caller. The compiler makes sure
//! nothing else can build either (no constructor, no `Clone`: the ui-tests show it); this
//! test pins *who* takes them and *where* the authority mints:
//! - production code takes the authority only in the runtime's `supervisor/proof.rs`, and
//!   the key only in the store (`store/mod.rs`), each once;
//! - the tokens are minted (`supervisor.confirm_stop(…)`, `.leaf_recorded`,
//!   `.observed_leaf`, `.compaction_reported`, `.capabilities`, and the checkout proofs
//!   `.change_recorded`, `.no_change_recorded`, `.landing_seen`; the authority is always
//!   bound as `supervisor`) only at [`MINT_POINTS`], the code that reads the worker's
//!   control lines and the transcript;
//! - a `Supervisor` appears in production signatures only where it is lent
//!   ([`LENT_TO`]), so a new holder is reviewed;
//! - no `unsafe fn` in the core: unsafe is for memory, not for marking authority.
//!
//! Test fixtures that script the evidence ([`TEST_TAKERS`]) take and mint freely.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// Production files that take a capability, and how many times.
const TAKERS: &[(&str, &str, usize)] = &[
    (
        "Supervisor::take",
        "crates/subzero-runtime/src/supervisor/proof.rs",
        1,
    ),
    (
        "StorageKey::take",
        "crates/subzero-runtime/src/store/mod.rs",
        1,
    ),
];

/// Production files that mint tokens, with the calls each makes.
const MINT_POINTS: &[(&str, &[&str])] = &[
    // `hello` → WorkerCapabilities, at the worker's start.
    (
        "crates/subzero-runtime/src/broker/worker/start.rs",
        &["supervisor.capabilities("],
    ),
    // `cancel_confirmed` → StopConfirmed, `leaf_committed` (at the run's completion) →
    // LeafRecorded, from the evidence the driver keeps until the settlement is stored.
    (
        "crates/subzero-runtime/src/broker/worker/settle.rs",
        &["supervisor.confirm_stop(", "supervisor.leaf_recorded("],
    ),
    // `compacted` → CompactionReported, as the worker's line is read.
    (
        "crates/subzero-runtime/src/broker/worker/driver.rs",
        &["supervisor.compaction_reported("],
    ),
    // The transcript leaf read from disk → ObservedLeaf, in the one verification pipeline
    // of both formats (the Rust worker's transcript and the Pi worker's session file).
    (
        "crates/subzero-runtime/src/broker/checkpoint/mod.rs",
        &["supervisor.observed_leaf("],
    ),
    // A checkout's files committed on its base and measured (or found unchanged), right
    // after the git engine's `record`.
    (
        "crates/subzero-runtime/src/broker/isolation/run.rs",
        &[
            "supervisor.change_recorded(",
            "supervisor.no_change_recorded(",
        ],
    ),
    // A change landed in the workspace, right after the git engine's `apply`.
    (
        "crates/subzero-runtime/src/broker/isolation/land.rs",
        &["supervisor.landing_seen("],
    ),
];

/// The checkout proofs (`RecordedChange`, `RecordedNoChange`, `LandingSeen`), minted
/// where the git engine has just committed, measured or landed a checkout (their files
/// are in [`MINT_POINTS`]).
const CHECKOUT_MINTS: &[&str] = &[
    "supervisor.change_recorded(",
    "supervisor.no_change_recorded(",
    "supervisor.landing_seen(",
];

/// Production files whose signatures or fields may name `Supervisor`: the runtime's
/// taker, the broker that holds the reference, and the mint points it is lent to.
const LENT_TO: &[&str] = &[
    "crates/subzero-runtime/src/supervisor/proof.rs",
    "crates/subzero-runtime/src/broker/mod.rs",
    "crates/subzero-runtime/src/broker/worker/settle.rs",
    "crates/subzero-runtime/src/broker/checkpoint/mod.rs",
];

/// Test code that scripts the evidence: it takes the capabilities for its own process.
const TEST_TAKERS: &[&str] = &[
    "crates/subzero-core/tests/",
    "crates/subzero-runtime/tests/",
    "ui-tests/",
];

/// This file, which names the calls in its patterns.
const THIS: &str = "crates/subzero-core/tests/testsuite/capabilities.rs";

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Every production Rust file of the workspace (and the fuzz crate), relative to the root:
/// test fixtures and `tests/` folders are left out.
fn production_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    let mut files = Vec::new();
    for top in ["crates", "xtask", "ui-tests", "fuzz"] {
        walk(&root.join(top), &mut files);
    }
    assert!(files.len() > 5, "walked too few files: {files:?}");
    files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .filter(|(rel, _)| {
            rel != THIS
                && !TEST_TAKERS.iter().any(|t| rel.starts_with(t))
                && !rel.contains("/tests/")
                && !rel.contains("/benches/")
        })
        .collect()
}

/// Code lines (comments left out) of `text` that contain `needle`.
fn count(text: &str, needle: &str) -> usize {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//") && l.contains(needle))
        .count()
}

#[test]
fn each_capability_is_taken_once_by_its_owner() {
    let sources = production_sources();
    for (call, owner, times) in TAKERS {
        let found: Vec<(String, usize)> = sources
            .iter()
            .map(|(rel, text)| (rel.clone(), count(text, call)))
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(
            found,
            vec![((*owner).to_owned(), *times)],
            "`{call}` must be called once, in {owner}, and nowhere else in production code"
        );
    }
}

#[test]
fn tokens_are_minted_only_where_their_evidence_is_observed() {
    let calls: Vec<&str> = MINT_POINTS
        .iter()
        .flat_map(|(_, calls)| calls.iter().copied())
        .chain(CHECKOUT_MINTS.iter().copied())
        .collect();
    let mut strays = Vec::new();
    for (rel, text) in production_sources() {
        if rel.starts_with("crates/subzero-core/") {
            continue;
        }
        let allowed: &[&str] = MINT_POINTS
            .iter()
            .find(|(p, _)| *p == rel)
            .map_or(&[], |(_, c)| c);
        for call in &calls {
            if count(&text, call) > 0 && !allowed.contains(call) {
                strays.push(format!("{rel}: {call}"));
            }
        }
    }
    assert!(
        strays.is_empty(),
        "a token is minted outside the reviewed points: {strays:?}; mint where the \
         evidence is observed, or add the file to MINT_POINTS with the reason"
    );
    for (rel, calls) in MINT_POINTS {
        let text = production_sources()
            .into_iter()
            .find(|(r, _)| r == rel)
            .map(|(_, t)| t)
            .unwrap_or_else(|| panic!("mint point {rel} is gone; update the list"));
        for call in *calls {
            assert!(count(&text, call) > 0, "{rel} no longer mints with {call}");
        }
    }
}

#[test]
fn the_authority_is_lent_only_to_the_listed_holders() {
    let mut holders = Vec::new();
    for (rel, text) in production_sources() {
        if rel.starts_with("crates/subzero-core/") {
            continue;
        }
        let named = text.lines().any(|l| {
            let code = l.trim_start();
            !code.starts_with("//")
                && !code.starts_with("use ")
                && (code.contains("&Supervisor")
                    || code.contains("Supervisor>")
                    || code.contains(": Supervisor"))
                || code.contains("&'static Supervisor")
        });
        if named && !LENT_TO.contains(&rel.as_str()) {
            holders.push(rel);
        }
    }
    assert!(
        holders.is_empty(),
        "a `Supervisor` is held or passed in {holders:?}; lend it only to the code that \
         observes the evidence, and add that file to LENT_TO with the reason"
    );
}

#[test]
fn the_core_has_no_unsafe_fn() {
    for (rel, text) in production_sources() {
        if rel.starts_with("crates/subzero-core/src/") {
            assert_eq!(
                count(&text, "unsafe fn"),
                0,
                "{rel}: `unsafe` is for memory; a capability is taken, not designated"
            );
        }
    }
}
