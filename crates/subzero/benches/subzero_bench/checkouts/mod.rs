//! Isolated checkouts (issue 37) timed on the generated [`Fixture`]: making one through
//! `subzero_runtime::checkout::prepare` beside `git worktree add` of the same repository,
//! and recording and applying a 100-file change.

pub mod fixture;

use std::path::Path;
use std::time::Instant;

use subzero_runtime::checkout::{
    self, ApplyMode, Base, PrepareRequest, Prepared, RecordRequest, Recorded,
};

use crate::Fail;
use crate::stats::{Samples, ms_since};
pub use fixture::Fixture;
use fixture::{DIRS, git, tracked_path};

const MIB: f64 = 1024.0 * 1024.0;

/// Time and disk of making a checkout, a sample a run.
#[derive(Default)]
pub struct Made {
    pub ms: Samples,
    pub disk_mib: Samples,
    /// Of that disk, git's own files (index, HEAD, refs, config).
    pub git_mib: Samples,
}

/// Checkouts through `prepare` and worktrees through `git worktree add`, alternating run
/// by run so both see the same page cache and the same machine; and checkouts made right
/// after one was removed.
///
/// Each series is removed only after it is made (untimed): ext4 passes over inodes freed
/// in the last minutes when it creates files, so a creation timed right after removing
/// 10,000 files pays for that removal (measured here: 1.8 s instead of 0.25 s for the same
/// `git checkout`). The third series shows that cost on its own.
pub fn make_both(fixture: &Fixture, runs: usize) -> Result<(Made, Made, Made), Fail> {
    let (mut ours, mut worktree, mut after_removal) =
        (Made::default(), Made::default(), Made::default());
    let mut made = Vec::new();
    for run in 0..runs {
        made.push(prepare_once(fixture, run, &mut ours)?);
        worktree_once(fixture, run, &mut worktree)?;
    }
    for run in 0..runs {
        worktree_remove(fixture, run)?;
    }
    for (run, (dir, base_ref)) in made.into_iter().enumerate() {
        checkout::remove(&fixture.workspace, &dir, &[&base_ref])?;
        let (dir, base_ref) = prepare_once(fixture, runs + run, &mut after_removal)?;
        checkout::remove(&fixture.workspace, &dir, &[&base_ref])?;
    }
    Ok((ours, worktree, after_removal))
}

/// The spawn's default: the working tree as the base, `node_modules` shared.
fn prepare_request<'a>(
    fixture: &'a Fixture,
    checkout: &'a Path,
    base_ref: &'a str,
    shared: &'a [String],
) -> PrepareRequest<'a> {
    PrepareRequest {
        workspace: &fixture.workspace,
        checkout,
        base: Base::WorkingTree,
        base_ref,
        include: &[],
        shared,
    }
}

/// One checkout, measured and kept; its directory and base ref, to remove.
fn prepare_once(
    fixture: &Fixture,
    run: usize,
    made: &mut Made,
) -> Result<(std::path::PathBuf, String), Fail> {
    let dir = fixture.scratch("checkouts", run);
    let base_ref = format!("refs/subzero/base/bench-{run}");
    let shared = ["node_modules".to_owned()];
    let start = Instant::now();
    let prepared = checkout::prepare(&prepare_request(fixture, &dir, &base_ref, &shared))?;
    made.ms.push(ms_since(start));
    if prepared.own_paths.is_empty() {
        return Err("prepare linked no node_modules".into());
    }
    made.disk_mib.push(checkout::disk_usage(&dir)? as f64 / MIB);
    made.git_mib
        .push(checkout::disk_usage(&dir.join(".git"))? as f64 / MIB);
    Ok((dir, base_ref))
}

fn worktree_once(fixture: &Fixture, run: usize, made: &mut Made) -> Result<(), Fail> {
    let dir = fixture.scratch("worktrees", run);
    let path = dir.to_str().ok_or("temp dir is not UTF-8")?;
    let start = Instant::now();
    git(
        &fixture.workspace,
        &["worktree", "add", "--quiet", "--detach", path, "HEAD"],
    )?;
    made.ms.push(ms_since(start));
    // The worktree's index and HEAD live in the workspace's `.git/worktrees/<name>`.
    let admin = fixture
        .workspace
        .join(".git/worktrees")
        .join(run.to_string());
    let admin_bytes = checkout::disk_usage(&admin)? + checkout::disk_usage(&dir.join(".git"))?;
    let bytes = checkout::disk_usage(&dir)? + checkout::disk_usage(&admin)?;
    made.disk_mib.push(bytes as f64 / MIB);
    made.git_mib.push(admin_bytes as f64 / MIB);
    Ok(())
}

fn worktree_remove(fixture: &Fixture, run: usize) -> Result<(), Fail> {
    let dir = fixture.scratch("worktrees", run);
    let path = dir.to_str().ok_or("temp dir is not UTF-8")?;
    git(&fixture.workspace, &["worktree", "remove", "--force", path])?;
    Ok(())
}

/// Recording and applying the same 100-file change, a sample a run.
#[derive(Default)]
pub struct Landed {
    pub record_ms: Samples,
    pub apply_ms: Samples,
}

/// One checkout with a line appended to one file in each of the 100 directories; each
/// run records it and applies it (uncommitted) to the workspace, which is reset after.
pub fn record_and_apply(fixture: &Fixture, runs: usize) -> Result<Landed, Fail> {
    let dir = fixture.scratch("change", 0);
    let base_ref = "refs/subzero/base/bench-change";
    let child_ref = "refs/subzero/children/bench-change";
    let shared = ["node_modules".to_owned()];
    let prepared = checkout::prepare(&prepare_request(fixture, &dir, base_ref, &shared))?;
    let landed = land_runs(fixture, &dir, &prepared, child_ref, runs);
    checkout::remove(&fixture.workspace, &dir, &[base_ref, child_ref])?;
    landed
}

fn land_runs(
    fixture: &Fixture,
    dir: &Path,
    prepared: &Prepared,
    child_ref: &str,
    runs: usize,
) -> Result<Landed, Fail> {
    edit_files(dir)?;
    let mut landed = Landed::default();
    for _ in 0..runs {
        let start = Instant::now();
        let recorded = checkout::record(&RecordRequest {
            workspace: &fixture.workspace,
            checkout: dir,
            base: &prepared.base,
            child_ref,
            child: "bench",
            own_paths: &prepared.own_paths,
        })?;
        landed.record_ms.push(ms_since(start));
        let Recorded::Changed(change) = recorded else {
            return Err("record saw no change".into());
        };
        let start = Instant::now();
        let applied = checkout::apply(
            &fixture.workspace,
            &prepared.base,
            &change.head,
            &ApplyMode::Uncommitted,
        )?;
        landed.apply_ms.push(ms_since(start));
        if applied.files.len() != DIRS || change.files_changed != DIRS {
            return Err(format!("applied {} files, not {DIRS}", applied.files.len()).into());
        }
        git(&fixture.workspace, &["reset", "--quiet", "--hard"])?;
    }
    Ok(landed)
}

/// Append a line to the first file of every directory: 100 edited files.
fn edit_files(checkout: &Path) -> Result<(), Fail> {
    use std::io::Write as _;
    for d in 0..DIRS {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(checkout.join(tracked_path(d, 0)))?;
        writeln!(file, "an edit made in the checkout")?;
    }
    Ok(())
}
