//! Isolated checkouts (issue 37), side by side with `git worktree add` in the same run:
//! how long making a child's checkout takes and what disk it adds, on a repository of
//! 10,000 tracked files and a 200 MB ignored `node_modules`, and how long landing a
//! 100-file change takes.
//!
//! Blocking: git runs in child processes while nothing else is in flight.

use crate::checkouts::{self, Fixture, fixture};
use crate::plan::Plan;
use crate::report::{Ratio, Target};
use crate::sink::Sink;

pub const ISOLATION: &str = "Isolated checkouts";
const WORKTREE: &str = "`git worktree add`";
const MIB: f64 = 1024.0 * 1024.0;

/// Every figure of the isolation section and its ratios, in the order of the report.
pub fn measure(plan: &Plan, sink: &mut Sink) {
    eprintln!("generating the isolation fixture repository…");
    let fixture = match Fixture::create() {
        Ok(fixture) => fixture,
        Err(e) => return sink.failed("isolation fixture", &e),
    };
    let tracked_mib = fixture.tracked_bytes as f64 / MIB;
    sink.notes.push(format!(
        "Isolation fixture: {} directories of {} small tracked files ({tracked_mib:.1} MiB on disk, committed) and an ignored `node_modules` of {} packages of {} files of 100 KB ({:.0} MiB), generated once in {:.1} s.",
        fixture::DIRS,
        fixture::FILES_PER_DIR,
        fixture::PACKAGES,
        fixture::FILES_PER_PACKAGE,
        fixture.modules_bytes as f64 / MIB,
        fixture.seconds,
    ));
    make_figures(&fixture, plan.checkout_runs, tracked_mib, sink);
    land_figures(&fixture, plan.checkout_runs, sink);
}

/// Making a checkout through `prepare` and a worktree through git, and the ratios.
fn make_figures(fixture: &Fixture, n: usize, tracked_mib: f64, sink: &mut Sink) {
    eprintln!("{n} checkouts and {n} worktrees of 10,000 files…");
    let (ours, worktree, after_removal) = match checkouts::make_both(fixture, n) {
        Ok(made) => made,
        Err(e) => return sink.failed("checkout and worktree creation", &e),
    };
    let (ours_ms, ours_mib) = (ours.ms.median(), ours.disk_mib.median());
    sink.add(ISOLATION, "creating a checkout (10,000 tracked files, 200 MB `node_modules`)", "ms", ours.ms, Some(Target::MedianAtMost(1000.0)),
        "`checkout::prepare` as a spawn makes one: base = the working tree (clean), `git clone --shared`, the base checked out, `node_modules` shared by a symlink; the series is removed after it is made, untimed (see the figure after the references)");
    // Any git checkout of these files keeps an index of them: the worktree's git files are
    // that floor, so the goal is the tracked files plus it (the change being empty here).
    let floor = tracked_mib + worktree.git_mib.median();
    sink.add(ISOLATION, "extra disk of a checkout", "MiB", ours.disk_mib, Some(Target::MaxAtMost(floor)),
        "`checkout::disk_usage` of the checkout directory: its files and its own `.git` (objects stay in the workspace's repository through alternates; `node_modules` is a link). Goal: the tracked files (the workspace's disk use without `.git` and `node_modules`) plus the git files a `git worktree add` of them needs (its index, below); the change is empty here");
    sink.add(ISOLATION, "of which the checkout's own `.git`", "MiB", ours.git_mib, None,
        "`disk_usage` of the checkout's `.git`: mostly the index of 10,000 entries, which any git checkout of these files needs (the worktree's is below)");
    let (theirs_ms, theirs_mib) = (worktree.ms.median(), worktree.disk_mib.median());
    sink.add(ISOLATION, "reference: `git worktree add` of the same repository", "ms", worktree.ms, None,
        "`git worktree add --detach DIR HEAD` with git's defaults (one checkout worker; `prepare` sets `checkout.workers=0`), run by run alternating with the checkouts above; it brings no `node_modules` at all (a child there would have none); the series is removed after it is made, untimed");
    sink.add(
        ISOLATION,
        "reference: disk of a `git worktree add`",
        "MiB",
        worktree.disk_mib,
        None,
        "the worktree directory plus its `.git/worktrees/NAME` in the workspace's repository",
    );
    sink.add(
        ISOLATION,
        "reference: of which the worktree's git files",
        "MiB",
        worktree.git_mib,
        None,
        "its `.git` file and `.git/worktrees/NAME` (index, HEAD)",
    );
    sink.add(ISOLATION, "creating a checkout right after removing one", "ms", after_removal.ms, None,
        "the same `prepare`, each run right after removing one of the checkouts above: ext4 passes over inodes freed in the last minutes when it creates files, so this pays for the removal of 10,000 files too (a `git worktree add` after a `git worktree remove` pays the same)");
    for (what, ours, theirs, unit) in [
        (
            "creating a checkout of 10,000 tracked files",
            ours_ms,
            theirs_ms,
            "ms",
        ),
        ("disk a checkout adds", ours_mib, theirs_mib, "MiB"),
    ] {
        sink.ratios.push(Ratio {
            peer: WORKTREE,
            what: what.to_owned(),
            ours,
            theirs,
            unit,
        });
    }
}

/// Recording and applying a 100-file change.
fn land_figures(fixture: &Fixture, n: usize, sink: &mut Sink) {
    eprintln!("{n} records and applies of a 100-file change…");
    match checkouts::record_and_apply(fixture, n) {
        Ok(landed) => {
            sink.add(ISOLATION, "recording a 100-file change", "ms", landed.record_ms, None,
                "`checkout::record` of a checkout where one file in each of the 100 directories gained a line: the checkout's files as a commit on its base (10,000 files scanned)");
            sink.add(ISOLATION, "applying a 100-file change (uncommitted)", "ms", landed.apply_ms, Some(Target::MedianAtMost(1000.0)),
                "`checkout::apply` with `ApplyMode::Uncommitted` into the clean workspace: checks, `merge-tree`, `git apply`; the workspace is `git reset --hard` after each run, untimed");
        }
        Err(e) => sink.failed("record and apply", &e),
    }
}
