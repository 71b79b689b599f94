//! Capability tokens are minted only where their evidence is observed.
//!
//! `Supervisor::designate` is the only way to mint `StopConfirmed`, `LeafRecorded`,
//! `ObservedLeaf` and `WorkerCapabilities`, and it is an `unsafe fn`: every call is an
//! `unsafe` block in a module that allows `unsafe_code`. `unsafe` makes a call visible;
//! this test pins *where* it may be. Production code designates exactly at
//! [`MINT_POINTS`] — the worker driver, where `hello`, `leaf_committed` and
//! `cancel_confirmed` are parsed, and the resume path's checkpoint verification, where
//! the transcript is read — and test fixtures only in [`TEST_MINTERS`]. Every call is
//! written `unsafe { Supervisor::designate() }` under a `// SAFETY:` comment naming the
//! evidence, and no production code passes the authority around (a `Supervisor` in a
//! signature or a field would let an unreviewed module mint). A new mint point fails
//! here until it is added to the list, so it is reviewed.
//!
//! The store's `StorageKey` (the authority to load lifecycle values from stored records)
//! is designated the same way and checked the same way: once, in the store
//! ([`KEY_POINTS`]), and by test fixtures in [`TEST_MINTERS`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// An `unsafe fn designate` authority: how its calls are written, where it is defined,
/// and the production files that may designate it (with how many times).
struct Authority {
    name: &'static str,
    call: &'static str,
    definition: &'static str,
    points: &'static [(&'static str, usize)],
}

/// The call, written the one way this test recognises.
const CALL: &str = "unsafe { Supervisor::designate() }";

const SUPERVISOR: Authority = Authority {
    name: "Supervisor::designate",
    call: CALL,
    definition: DEFINITION,
    points: MINT_POINTS,
};

/// The store designates its key once, in the module that owns it.
const KEY_POINTS: &[(&str, usize)] = &[("crates/subzero-runtime/src/store/mod.rs", 1)];

const STORAGE_KEY: Authority = Authority {
    name: "StorageKey::designate",
    call: "unsafe { StorageKey::designate() }",
    definition: "crates/subzero-core/src/lifecycle/storage.rs",
    points: KEY_POINTS,
};

const AUTHORITIES: [Authority; 2] = [SUPERVISOR, STORAGE_KEY];

/// Production files that mint, and how many times each designates.
const MINT_POINTS: &[(&str, usize)] = &[
    // `hello` → WorkerCapabilities, at the worker's start.
    ("crates/subzero-runtime/src/broker/worker/start.rs", 1),
    // `cancel_confirmed` → StopConfirmed, `leaf_committed` (at the run's completion) →
    // LeafRecorded, from the evidence the driver keeps until the settlement is stored.
    ("crates/subzero-runtime/src/broker/worker/settle.rs", 2),
    // `compacted` → CompactionReported, as the worker's line is read.
    ("crates/subzero-runtime/src/broker/worker/driver.rs", 1),
    // the transcript leaf read from disk → ObservedLeaf (the Rust worker's transcript, and
    // the Pi worker's session file).
    ("crates/subzero-runtime/src/broker/checkpoint/mod.rs", 1),
    ("crates/subzero-runtime/src/broker/checkpoint/pi.rs", 1),
];

/// Test code that scripts the evidence and may mint freely (each call still `unsafe`
/// with a `SAFETY` comment).
const TEST_MINTERS: &[&str] = &[
    "crates/subzero-core/tests/",
    "crates/subzero-runtime/tests/common/",
    "ui-tests/",
];

/// The definition itself.
const DEFINITION: &str = "crates/subzero-core/src/lifecycle/proof.rs";

/// This file, which names the call in its patterns.
const THIS: &str = "crates/subzero-core/tests/capabilities.rs";

/// The compile-fail cases: illegal on purpose (one calls `designate` outside `unsafe`).
const COMPILE_FAIL: &str = "ui-tests/tests/ui/";

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

/// Every Rust file of the workspace (and the fuzz crate), relative to the root.
fn sources() -> Vec<(String, String)> {
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
        .filter(|(rel, _)| rel != THIS)
        .collect()
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with("//")
}

/// Lines (0-based) that call `authority`'s `designate`, comments left out.
fn calls(text: &str, authority: &Authority) -> Vec<usize> {
    let called = format!("{}(", authority.name);
    text.lines()
        .enumerate()
        .filter(|(_, l)| !is_comment(l) && l.contains(&called))
        .map(|(i, _)| i)
        .collect()
}

fn is_test_minter(rel: &str) -> bool {
    TEST_MINTERS.iter().any(|t| rel.starts_with(t))
}

fn designated_only_at_its_points(authority: &Authority, sources: &[(String, String)]) {
    let mut found: Vec<(String, usize)> = Vec::new();
    let mut strays = Vec::new();
    for (rel, text) in sources {
        let n = calls(text, authority).len();
        if *rel == authority.definition {
            assert_eq!(n, 0, "{rel} designates outside its definition");
        } else if n > 0 && !is_test_minter(rel) && !rel.starts_with(COMPILE_FAIL) {
            if authority.points.iter().any(|(p, _)| p == rel) {
                found.push((rel.clone(), n));
            } else {
                strays.push(rel.clone());
            }
        }
    }
    assert!(
        strays.is_empty(),
        "`{}` is called outside the reviewed points in {strays:?}; designate where the \
         evidence is observed, or add the file to its list with the reason",
        authority.name
    );
    let mut expected: Vec<(String, usize)> = authority
        .points
        .iter()
        .map(|(p, n)| ((*p).to_owned(), *n))
        .collect();
    expected.sort();
    found.sort();
    assert_eq!(
        found, expected,
        "the production points of `{}` changed; review each and update the list",
        authority.name
    );
}

#[test]
fn the_supervisor_is_designated_only_at_the_listed_mint_points() {
    designated_only_at_its_points(&SUPERVISOR, &sources());
}

#[test]
fn the_storage_key_is_designated_once_in_the_store() {
    designated_only_at_its_points(&STORAGE_KEY, &sources());
}

#[test]
fn every_designation_is_an_unsafe_block_under_a_safety_comment() {
    let mut bad = Vec::new();
    for (rel, text) in sources() {
        if rel.starts_with(COMPILE_FAIL) {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for authority in &AUTHORITIES {
            if rel == authority.definition {
                continue;
            }
            for i in calls(&text, authority) {
                let justified = lines[i.saturating_sub(4)..i]
                    .iter()
                    .any(|l| l.trim_start().starts_with("// SAFETY: "));
                if !lines[i].contains(authority.call) || !justified {
                    bad.push(format!("{rel}:{}", i + 1));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "write each designation as `unsafe {{ …::designate() }}` with a `// SAFETY: ` \
         comment (at most 4 lines above) naming the evidence just observed; offending \
         lines: {bad:?}"
    );
}

/// Whether every `CALL` on line `i` is used at once, `CALL.token(…)` (the method call
/// may be on the next line), so the authority lives only for that expression.
fn used_inline(lines: &[&str], i: usize) -> bool {
    lines[i].split(CALL).skip(1).all(|rest| {
        let rest = rest.trim_start();
        rest.starts_with('.')
            || (rest.is_empty()
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with('.')))
    })
}

#[test]
fn production_code_never_passes_the_minting_authority_around() {
    let mut leaks = Vec::new();
    for (rel, text) in sources() {
        if rel.starts_with("crates/subzero-core/") || is_test_minter(&rel) {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let mut in_use = false;
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            if in_use || code.starts_with("use ") || code.starts_with("pub use ") {
                in_use = !code.trim_end().ends_with(';');
                continue;
            }
            if is_comment(code) || !code.contains("Supervisor") {
                continue;
            }
            // Only the inline call may name it: no `Supervisor` parameter, field, return
            // type, or binding that outlives the expression.
            if code.replace(CALL, "").contains("Supervisor") || !used_inline(&lines, i) {
                leaks.push(format!("{rel}:{}", i + 1));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "a `Supervisor` escapes its mint point at {leaks:?}; mint the token inline, \
         `{CALL}.<token>(…)`, where the evidence is observed"
    );
}
