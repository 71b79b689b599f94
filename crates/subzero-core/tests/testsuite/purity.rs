//! subzero-core stays pure: no async runtime, database, MCP, HTTP or process crate in
//! its (non-dev) dependency tree. Checked on the resolved graph from `cargo metadata`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use cargo_metadata::{DependencyKind, MetadataCommand, PackageId};

/// Crate names (or prefixes ending in `-`/`_`) that must never be reachable.
const FORBIDDEN: &[&str] = &[
    // async runtimes and their I/O layers
    "tokio",
    "tokio-",
    "async-std",
    "smol",
    "mio",
    "futures",
    "futures-",
    // databases
    "rusqlite",
    "libsqlite3-sys",
    "sqlx",
    "diesel",
    // MCP and HTTP
    "rmcp",
    "reqwest",
    "hyper",
    "hyper-",
    "http",
    "h2",
    "ureq",
    "axum",
    "tower",
    "eventsource-stream",
    "rustls",
    "url",
    // processes and OS control
    "nix",
    "rustix",
    "subprocess",
    "duct",
    "command-group",
    "landlock",
    "signal-hook",
];

fn forbidden(name: &str) -> bool {
    FORBIDDEN.iter().any(|f| {
        if f.ends_with('-') || f.ends_with('_') {
            name.starts_with(f)
        } else {
            name == *f
        }
    })
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("a host line")
        .trim()
        .to_owned()
}

#[test]
fn core_depends_on_no_runtime_database_mcp_http_or_process_crate() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    // Resolve for the machine we build on; wasm-only edges (ulid → web-time → js-sys)
    // would otherwise pull in crates that never build here.
    let metadata = MetadataCommand::new()
        .manifest_path(&manifest)
        .other_options(vec!["--filter-platform".to_owned(), host_triple()])
        .exec()
        .expect("cargo metadata");
    let resolve = metadata.resolve.as_ref().expect("a resolved graph");
    let nodes: HashMap<&PackageId, _> = resolve.nodes.iter().map(|n| (&n.id, n)).collect();
    let core = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "subzero-core")
        .expect("subzero-core in the workspace");
    let names: HashMap<&PackageId, &str> = metadata
        .packages
        .iter()
        .map(|p| (&p.id, p.name.as_str()))
        .collect();

    let mut seen = BTreeSet::new();
    let mut stack = vec![&core.id];
    let mut reached = BTreeSet::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let node = nodes[id];
        for dep in &node.deps {
            let runtime_dep = dep
                .dep_kinds
                .iter()
                .any(|k| k.kind != DependencyKind::Development);
            if runtime_dep {
                reached.insert(names[&dep.pkg]);
                stack.push(&dep.pkg);
            }
        }
    }
    let bad: Vec<_> = reached.iter().filter(|n| forbidden(n)).collect();
    assert!(
        bad.is_empty(),
        "subzero-core must stay pure, but its dependency tree contains {bad:?}; move that code to subzero-runtime"
    );
    assert!(
        reached.contains("serde"),
        "the walk found core's dependencies: {reached:?}"
    );
    assert!(
        !reached.iter().any(|n| n.starts_with("subzero")),
        "core depends on nothing of ours: {reached:?}"
    );
}
