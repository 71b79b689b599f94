//! Isolated checkouts: how many the ledger holds in each state, what their directories
//! take on disk (measured now, not the ledger's last figure), and each directory in the
//! checkouts directory that no checkout of the ledger names (an orphan). Read-only.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use subzero_core::CheckoutState;
use subzero_runtime::checkout::disk_usage;
use subzero_runtime::paths::StatePaths;
use subzero_runtime::store::{CheckoutFilter, CheckoutRow, Store, StoreOptions};

use super::report::Check;
use crate::inspect::change::size_text;

/// The checkouts check, then one warning per orphan directory. Nothing when there is
/// neither a ledger entry nor a checkouts directory.
pub fn check_checkouts(root: &Path) -> Vec<Check> {
    let paths = StatePaths::existing(root);
    let rows = match ledger(&paths) {
        Ok(rows) => rows,
        Err(why) => {
            return vec![Check::warn(
                "checkouts",
                format!("cannot read the checkout ledger: {why}"),
                "see the database check above; `subzero gc` needs the same database",
            )];
        }
    };
    let dir = paths.checkouts_dir();
    let dirs = match directories(&dir) {
        Ok(dirs) => dirs,
        Err(e) => {
            return vec![Check::warn(
                "checkouts",
                format!("cannot read {}: {e}", dir.display()),
                format!("make {} a directory you own (mode 0700)", dir.display()),
            )];
        }
    };
    if rows.is_empty() && dirs.is_empty() {
        return vec![Check::pass("checkouts", "no isolated checkouts")];
    }
    let known: HashSet<String> = rows.iter().map(|r| r.child_id.to_string()).collect();
    let (orphans, known_dirs): (Vec<PathBuf>, Vec<PathBuf>) = dirs.into_iter().partition(|d| {
        d.file_name()
            .is_none_or(|n| !known.contains(&*n.to_string_lossy()))
    });
    let mut checks = vec![summary(&rows, &known_dirs)];
    checks.extend(orphans.iter().map(|d| orphan(d)));
    checks
}

/// Every checkout of the ledger (none without a database).
fn ledger(paths: &StatePaths) -> Result<Vec<CheckoutRow>, String> {
    let store = Store::open_read_only(&paths.database(), StoreOptions::default())
        .map_err(|e| e.to_string())?;
    let Some(store) = store else {
        return Ok(Vec::new());
    };
    let runtime = crate::inspect::runtime().map_err(|e| e.to_string())?;
    let rows = runtime.block_on(store.list_checkouts(CheckoutFilter::default()));
    store.close();
    rows.map_err(|e| e.to_string())
}

/// The entries of the checkouts directory (none when it does not exist).
fn directories(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut dirs: Vec<PathBuf> = entries
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()?;
            dirs.sort();
            Ok(dirs)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// `N checkouts: 1 settled_changed, 2 applied; 3 directories on disk, 1.2 MiB (…)`;
/// a warning when finished checkouts still hold directories (`subzero gc` frees them).
fn summary(rows: &[CheckoutRow], dirs: &[PathBuf]) -> Check {
    let mut by_state: BTreeMap<&'static str, usize> = BTreeMap::new();
    for row in rows {
        *by_state.entry(row.state.as_str()).or_default() += 1;
    }
    let states: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let bytes: u64 = dirs.iter().map(|d| disk_usage(d).unwrap_or(0)).sum();
    let detail = format!(
        "{} checkout(s): {}; {} director{} on disk, {} ({bytes} bytes)",
        rows.len(),
        if states.is_empty() {
            "none in the ledger".to_owned()
        } else {
            states.join(", ")
        },
        dirs.len(),
        if dirs.len() == 1 { "y" } else { "ies" },
        size_text(bytes)
    );
    let finished = rows
        .iter()
        .filter(|r| {
            matches!(
                r.state,
                CheckoutState::Applied | CheckoutState::Discarded | CheckoutState::Removed
            ) && dirs.iter().any(|d| d.ends_with(r.child_id.to_string()))
        })
        .count();
    if finished > 0 {
        return Check::warn(
            "checkouts",
            format!("{detail}; {finished} finished checkout(s) still hold their directory"),
            "`subzero gc` lists what it would remove; `subzero gc --apply --older-than 0` removes it now",
        );
    }
    Check::pass("checkouts", detail)
}

/// A directory no checkout of the ledger names.
fn orphan(dir: &Path) -> Check {
    let bytes = disk_usage(dir).unwrap_or(0);
    let shown = dir.display();
    Check::warn(
        "checkout orphan",
        format!(
            "{shown} is in the checkouts directory but no checkout in the ledger names it; {} ({bytes} bytes)",
            size_text(bytes)
        ),
        format!(
            "check it holds nothing you need (a spawn that is preparing a checkout makes its directory just before its row), then `rm -rf {shown}`; `subzero gc` collects only checkouts the ledger knows"
        ),
    )
}
