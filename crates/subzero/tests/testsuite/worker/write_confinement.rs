//! `write` and `edit` never reach outside the workspace through a symlink or `..`, even when the
//! grant has no `bash` (a template granting only the file tools relies on this).
//!
//! Every case lays out `base/ws` (the workspace) next to `base/out` (what must stay untouched),
//! plants links in the workspace, drives a real worker through the scripted model, and checks
//! both the tool results and that nothing under `base` outside `ws` changed.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::support::worker::ControlLines;
use crate::support::worker::{RunSpec, WorkerProc, snapshot, tool_results};
use serde_json::{Value, json};
use subzero_protocol::RunSettledStatus;
use subzero_testkit::{Reply, ScriptedServer};

/// A workspace next to a directory that must stay as it was.
struct Layout {
    _base: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    out: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical base");
        let ws = base.join("ws");
        let out = base.join("out");
        std::fs::create_dir(&ws).expect("workspace");
        std::fs::create_dir(&out).expect("outside dir");
        Self {
            _base: dir,
            base,
            ws,
            out,
        }
    }

    /// Every path under `base` except the workspace, with file contents.
    fn outside(&self) -> BTreeMap<PathBuf, Option<String>> {
        let mut seen = BTreeMap::new();
        walk(&self.base, &self.ws, &mut seen);
        seen
    }
}

fn walk(dir: &Path, skip: &Path, seen: &mut BTreeMap<PathBuf, Option<String>>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path == skip {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).expect("lstat");
        if meta.is_dir() {
            seen.insert(path.clone(), None);
            walk(&path, skip, seen);
        } else {
            seen.insert(path.clone(), std::fs::read_to_string(&path).ok());
        }
    }
}

/// The grant the attack targets: file tools, write-capable, no `bash`.
fn writer() -> Value {
    snapshot("writer", &["read", "ls", "write", "edit"], true)
}

/// Runs `calls` (name, arguments) in one turn and returns the tool results in order.
fn run_tools(ws: &Path, run_id: &str, calls: &[(&str, Value)]) -> Vec<String> {
    let owned: Vec<(String, &str, String)> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| (format!("c{i}"), *name, args.to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> = owned
        .iter()
        .map(|(id, name, args)| (id.as_str(), *name, args.as_str()))
        .collect();
    let server =
        ScriptedServer::start(vec![Reply::tool_calls(&refs), Reply::text("done")]).expect("server");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let mut worker = WorkerProc::spawn();
    let spec = RunSpec::new(run_id, server.base_url(), writer(), ws, &transcript);
    worker.send(&spec.message());
    let settled = worker.run_settled(run_id);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), calls.len(), "{results:#?}");
    results
}

fn assert_refused(result: &str) {
    assert!(
        result.starts_with("error:") && result.contains("outside the workspace"),
        "expected an outside-the-workspace refusal, got: {result}"
    );
}

#[test]
fn write_through_a_dangling_absolute_link_creates_nothing_outside() {
    let layout = Layout::new();
    std::fs::create_dir(layout.ws.join("notes")).expect("seed");
    symlink(
        layout.out.join("planted.txt"),
        layout.ws.join("notes/x.txt"),
    )
    .expect("link");
    let before = layout.outside();

    let results = run_tools(
        &layout.ws,
        "run_00000000000000000000000001",
        &[(
            "write",
            json!({"path": "notes/x.txt", "content": "escaped"}),
        )],
    );

    assert_refused(&results[0]);
    assert!(!layout.out.join("planted.txt").exists());
    assert_eq!(layout.outside(), before);
}

#[test]
fn write_and_edit_through_a_live_link_leave_the_outside_file_alone() {
    let layout = Layout::new();
    std::fs::write(layout.out.join("secret.txt"), "original secret\n").expect("seed");
    symlink(layout.out.join("secret.txt"), layout.ws.join("secret.txt")).expect("link");
    let before = layout.outside();

    let results = run_tools(
        &layout.ws,
        "run_00000000000000000000000002",
        &[
            (
                "write",
                json!({"path": "secret.txt", "content": "replaced"}),
            ),
            (
                "edit",
                json!({"path": "secret.txt", "oldText": "original", "newText": "edited"}),
            ),
        ],
    );

    assert_refused(&results[0]);
    assert_refused(&results[1]);
    assert!(
        !results[1].contains("original secret"),
        "errors never echo file contents: {}",
        results[1]
    );
    assert_eq!(layout.outside(), before);
}

#[test]
fn write_through_a_relative_dangling_link_to_the_parent_creates_nothing_outside() {
    let layout = Layout::new();
    symlink("../outside.txt", layout.ws.join("rel.txt")).expect("link");
    let before = layout.outside();

    let results = run_tools(
        &layout.ws,
        "run_00000000000000000000000003",
        &[("write", json!({"path": "rel.txt", "content": "escaped"}))],
    );

    assert_refused(&results[0]);
    assert!(!layout.base.join("outside.txt").exists());
    assert_eq!(layout.outside(), before);
}

#[test]
fn dot_dot_through_a_linked_directory_is_refused() {
    let layout = Layout::new();
    std::fs::create_dir(layout.out.join("dir")).expect("seed");
    symlink(layout.out.join("dir"), layout.ws.join("linkdir")).expect("link");
    std::fs::write(layout.out.join("dir/kept.txt"), "kept\n").expect("seed");
    let before = layout.outside();

    let results = run_tools(
        &layout.ws,
        "run_00000000000000000000000004",
        &[
            (
                "write",
                json!({"path": "linkdir/../../x", "content": "escaped"}),
            ),
            (
                "edit",
                json!({"path": "linkdir/../dir/kept.txt", "oldText": "kept", "newText": "gone"}),
            ),
        ],
    );

    assert_refused(&results[0]);
    assert_refused(&results[1]);
    assert!(!layout.base.join("x").exists());
    assert_eq!(layout.outside(), before);
}

#[test]
fn a_directory_link_pointing_outside_is_refused_as_a_parent() {
    let layout = Layout::new();
    std::fs::create_dir(layout.out.join("dir")).expect("seed");
    symlink(layout.out.join("dir"), layout.ws.join("outdir")).expect("link");
    symlink(layout.out.join("ghost"), layout.ws.join("ghostdir")).expect("link");
    symlink("../out/dir", layout.ws.join("reloutdir")).expect("link");
    let before = layout.outside();

    let results = run_tools(
        &layout.ws,
        "run_00000000000000000000000005",
        &[
            (
                "write",
                json!({"path": "outdir/new.txt", "content": "escaped"}),
            ),
            (
                "write",
                json!({"path": "outdir/deeper/new.txt", "content": "escaped"}),
            ),
            (
                "write",
                json!({"path": "ghostdir/new.txt", "content": "escaped"}),
            ),
            (
                "write",
                json!({"path": "reloutdir/new.txt", "content": "escaped"}),
            ),
        ],
    );

    for result in &results {
        assert_refused(result);
    }
    assert!(!layout.out.join("dir/new.txt").exists());
    assert!(!layout.out.join("dir/deeper").exists());
    assert!(!layout.out.join("ghost").exists());
    assert_eq!(layout.outside(), before);
}

#[test]
fn links_that_stay_inside_the_workspace_keep_working() {
    let layout = Layout::new();
    std::fs::create_dir(layout.ws.join("notes")).expect("seed");
    std::fs::write(layout.ws.join("notes/real.txt"), "first draft\n").expect("seed");
    symlink("real.txt", layout.ws.join("notes/link.txt")).expect("link");
    symlink("fresh.txt", layout.ws.join("notes/pending.txt")).expect("link");
    std::fs::create_dir(layout.ws.join("sub")).expect("seed");
    symlink("../sub", layout.ws.join("notes/subdir")).expect("link");
    let before = layout.outside();

    let results = run_tools(
        &layout.ws,
        "run_00000000000000000000000006",
        &[
            (
                "write",
                json!({"path": "notes/link.txt", "content": "second draft\n"}),
            ),
            (
                "edit",
                json!({"path": "notes/link.txt", "oldText": "second", "newText": "third"}),
            ),
            (
                "write",
                json!({"path": "notes/pending.txt", "content": "created through a link\n"}),
            ),
            (
                "write",
                json!({"path": "notes/subdir/made/here.txt", "content": "nested\n"}),
            ),
            ("write", json!({"path": "a/b/c.txt", "content": "plain\n"})),
        ],
    );

    assert!(results[0].contains("wrote 13 bytes"), "{}", results[0]);
    assert!(results[1].contains("edited"), "{}", results[1]);
    assert!(results[2].contains("wrote"), "{}", results[2]);
    assert!(results[3].contains("wrote"), "{}", results[3]);
    assert!(results[4].contains("wrote"), "{}", results[4]);
    let read = |p: &str| std::fs::read_to_string(layout.ws.join(p)).expect(p);
    assert_eq!(read("notes/real.txt"), "third draft\n");
    assert!(
        std::fs::symlink_metadata(layout.ws.join("notes/link.txt"))
            .expect("lstat")
            .file_type()
            .is_symlink(),
        "the link itself is kept"
    );
    assert_eq!(read("notes/fresh.txt"), "created through a link\n");
    assert_eq!(read("sub/made/here.txt"), "nested\n");
    assert_eq!(read("a/b/c.txt"), "plain\n");
    assert_eq!(layout.outside(), before);
}
