//! The checkpoint's checks of isolated checkouts, made once every child has settled, from
//! what is on disk: the store's ledger of checkouts (read-only), the checkouts directory
//! and the workspace's repository and files. Nothing recorded is lost (`checkouts-kept`),
//! nothing lands twice (`changes-land-once`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::Ctx;
use crate::model::{NOTES, WRITES};
use crate::repo;
use crate::verdict::Invariant;

/// The states of a checkout whose directory holds work that is not over: the child's
/// files (`prepared`, `in_use`) or its recorded change (`settled_*`).
const UNFINISHED: [&str; 4] = ["prepared", "in_use", "settled_changed", "settled_unchanged"];

/// One row of the ledger, as the checks read it.
#[derive(Clone, Debug)]
struct Row {
    child: String,
    path: PathBuf,
    state: String,
    base: String,
    head: Option<String>,
}

/// Both checks, after every child settled.
pub fn check(ctx: &Ctx) {
    let db = ctx.world.state.join("subzero.db");
    if !db.exists() {
        return;
    }
    let conn = match rusqlite::Connection::open_with_flags(
        &db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    ) {
        Ok(conn) => conn,
        Err(e) => {
            ctx.violation(
                Invariant::CheckoutsKept,
                format!("the ledger of checkouts cannot be opened: {e}"),
            );
            return;
        }
    };
    let _ = conn.busy_timeout(Duration::from_secs(10));
    let rows = match rows(&conn) {
        Ok(rows) => rows,
        Err(e) => {
            ctx.violation(
                Invariant::CheckoutsKept,
                format!("the ledger of checkouts cannot be read: {e}"),
            );
            return;
        }
    };
    kept(ctx, &conn, &rows);
    landed_once(ctx, &rows);
    let mut stats = ctx.stats();
    stats.checkouts.clear();
    for row in &rows {
        *stats.checkouts.entry(row.state.clone()).or_default() += 1;
    }
}

fn rows(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(
        "SELECT child_id, path, state, base_commit, head_commit FROM checkouts ORDER BY rowid",
    )?;
    stmt.query_map([], |r| {
        Ok(Row {
            child: r.get("child_id")?,
            path: PathBuf::from(r.get::<_, String>("path")?),
            state: r.get("state")?,
            base: r.get("base_commit")?,
            head: r.get("head_commit")?,
        })
    })?
    .collect()
}

/// Every unfinished checkout has its directory; a recorded change not yet applied or
/// discarded has its ref at its head; every directory is the ledger's. A directory the
/// ledger does not know is tolerated only for a child that was never stored, as many as
/// isolated spawns were cut by a broker kill (the broker makes the directory, then the
/// child, then the ledger's row; `subzero doctor` reports such a directory, and the user
/// removes it). A *stored* child with a directory but no row is a violation: its next run
/// would work in the workspace, not in the checkout it was spawned with.
fn kept(ctx: &Ctx, conn: &rusqlite::Connection, rows: &[Row]) {
    let workspace = &ctx.world.workspace;
    for row in rows {
        let child = &row.child;
        if UNFINISHED.contains(&row.state.as_str()) && !row.path.is_dir() {
            ctx.violation(
                Invariant::CheckoutsKept,
                format!(
                    "the checkout of child {child} is {} in the ledger, yet its directory {} is gone",
                    row.state,
                    row.path.display()
                ),
            );
        }
        if row.state == "settled_changed" {
            let name = format!("refs/subzero/children/{child}");
            let target = repo::ref_target(workspace, &name);
            if target.is_none() || target != row.head {
                ctx.violation(
                    Invariant::CheckoutsKept,
                    format!(
                        "the recorded change of child {child} (head {}) is not applied or discarded, yet {name} is {}",
                        row.head.as_deref().unwrap_or("none"),
                        target.as_deref().unwrap_or("missing")
                    ),
                );
            }
        }
    }
    let known: BTreeSet<&str> = rows.iter().map(|r| r.child.as_str()).collect();
    let mut orphans = Vec::new();
    for dir in directories(&ctx.world.checkouts) {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if known.contains(name.as_str()) {
            continue;
        }
        if stored(conn, &name) {
            ctx.violation(
                Invariant::CheckoutsKept,
                format!(
                    "child {name} is stored and its checkout {} is on disk, yet the ledger has no checkout of it: its runs would work in the workspace",
                    dir.display()
                ),
            );
        } else {
            orphans.push(dir);
        }
    }
    let cut = ctx.ledger().cut_isolated_spawns();
    if orphans.len() as u64 > cut {
        let shown: Vec<String> = orphans.iter().map(|d| d.display().to_string()).collect();
        ctx.violation(
            Invariant::CheckoutsKept,
            format!(
                "{} checkout directories no ledger row names ({}), but only {cut} isolated spawns were cut by a broker kill",
                orphans.len(),
                shown.join(", ")
            ),
        );
    }
    ctx.stats().orphans = orphans.len() as u64;
}

/// The entries of the checkouts directory (none before the first isolated spawn).
fn directories(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    dirs
}

/// Whether the store has child `name`.
fn stored(conn: &rusqlite::Connection, name: &str) -> bool {
    conn.query_row("SELECT 1 FROM children WHERE child_id = ?1", [name], |_| {
        Ok(())
    })
    .is_ok()
}

/// Every line a coder wrote names its call, so none is in the workspace twice; each line a
/// recorded change added is there exactly once when the change was applied, and not at
/// all when it was not — unless an apply of it was cut by a broker kill, which may land it
/// before the ledger hears of it (then at most once).
fn landed_once(ctx: &Ctx, rows: &[Row]) {
    no_line_twice(ctx);
    let checked: u64 = rows.iter().map(|row| change_landed(ctx, row)).sum();
    ctx.stats().landed_lines = checked;
}

/// No line of the files the coders write is in the workspace twice.
fn no_line_twice(ctx: &Ctx) {
    for (file, text) in written_files(&ctx.world.workspace) {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            *seen.entry(line).or_default() += 1;
        }
        for (line, n) in seen.into_iter().filter(|(_, n)| *n > 1) {
            ctx.violation(
                Invariant::ChangesLandOnce,
                format!(
                    "the line {line:?} is in {} {n} times; each is written once",
                    file.display()
                ),
            );
        }
    }
}

/// Each line `row`'s recorded change added is in the workspace as often as the change was
/// landed; returns how many lines were looked for.
fn change_landed(ctx: &Ctx, row: &Row) -> u64 {
    let workspace = &ctx.world.workspace;
    let Some(head) = &row.head else {
        return 0;
    };
    let Some(added) = repo::added_lines(workspace, &row.base, head) else {
        return 0;
    };
    let applies = ctx.ledger().applies_of(&row.child);
    let applied = row.state == "applied";
    let mut checked = 0u64;
    for (path, lines) in added {
        let text = std::fs::read_to_string(workspace.join(&path)).unwrap_or_default();
        for line in lines {
            checked += 1;
            let n = text.lines().filter(|l| *l == line).count();
            let fine = if applied {
                n == 1
            } else {
                n == 0 || (n == 1 && applies.cut)
            };
            if fine {
                continue;
            }
            let landed = if applied {
                "was applied".to_owned()
            } else {
                format!("is {}, not applied", row.state)
            };
            ctx.violation(
                Invariant::ChangesLandOnce,
                format!(
                    "the change of child {} ({}..{head}) {landed}, and the line {line:?} it added to {} is in the workspace {n} times (its applies: ok {:?}, refused {:?}, cut by a kill: {})",
                    row.child,
                    row.base,
                    path.display(),
                    applies.ok,
                    applies.refused,
                    applies.cut
                ),
            );
        }
    }
    checked
}

/// The files the coders' writes append to, with their text: `soak-writes.txt` and every
/// `soak-notes/*.txt` of the workspace.
fn written_files(workspace: &Path) -> Vec<(PathBuf, String)> {
    let mut files = vec![PathBuf::from(WRITES)];
    files.extend(
        directories(&workspace.join(NOTES))
            .into_iter()
            .filter_map(|p| Some(Path::new(NOTES).join(p.file_name()?))),
    );
    files
        .into_iter()
        .filter_map(|f| Some((f.clone(), std::fs::read_to_string(workspace.join(&f)).ok()?)))
        .collect()
}
