//! One soak run: a schedule played against a fresh world, checked after every epoch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::checks;
use crate::exec::Ctx;
use crate::faults;
use crate::ledger::Ledger;
use crate::monitor::Monitor;
use crate::schedule::{Action, Schedule};
use crate::stats::Stats;
use crate::verdict::{Invariant, Verdicts, Violation};
use crate::world::World;

/// How a run is played.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where `subzero`, `subzero-worker` and `subzero-hold` are.
    pub bin_dir: PathBuf,
    /// How long children may take to settle at a checkpoint.
    pub settle_bound: Duration,
    /// Stop at the first checkpoint that finds a violation.
    pub stop_on_violation: bool,
    /// Print each epoch as it ends.
    pub verbose: bool,
    /// Keep a failing run's directory (logs, database, transcripts) for a look.
    pub keep_failed: bool,
    /// Keep every run's directory.
    pub keep_all: bool,
}

/// What one run found.
#[derive(Debug)]
pub struct Outcome {
    pub seed: u64,
    pub brokers: usize,
    /// Steps played (all of them, unless the run stopped at a violation).
    pub steps: usize,
    pub violations: Vec<Violation>,
    pub stats: Stats,
    /// The run's directory, kept when it failed.
    pub kept: Option<PathBuf>,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn failed(&self) -> bool {
        !self.violations.is_empty()
    }
}

/// Plays `schedule` against a fresh world.
pub async fn run(schedule: &Schedule, options: &Options) -> Result<Outcome, String> {
    let started = Instant::now();
    let world = Arc::new(World::new(&options.bin_dir, schedule.brokers)?);
    let verdicts = Arc::new(Verdicts::default());
    let step = Arc::new(AtomicUsize::new(0));
    let ctx = Arc::new(Ctx {
        world: world.clone(),
        schedule: schedule.clone(),
        ledger: Mutex::new(Ledger::default()),
        verdicts: verdicts.clone(),
        stats: Mutex::new(Stats {
            runs: 1,
            ..Stats::default()
        }),
        step: step.clone(),
    });
    for b in 0..schedule.brokers {
        world.start_broker(b, Duration::from_secs(60)).await?;
    }
    let monitor = Monitor::start(
        world.state.clone(),
        world.root.clone(),
        verdicts.clone(),
        step.clone(),
    );
    let mut index = 0usize;
    for (e, epoch) in schedule.epochs.iter().enumerate() {
        index = play_epoch(&ctx, epoch, index).await;
        checks::checkpoint(&ctx, options.settle_bound).await;
        ctx.stats().epochs += 1;
        if options.verbose {
            eprintln!(
                "soak seed {}: epoch {}/{} done ({} steps, {} violations, {:.1} s)",
                schedule.seed,
                e + 1,
                schedule.epochs.len(),
                index,
                verdicts.all().len(),
                started.elapsed().as_secs_f64()
            );
        }
        if options.stop_on_violation && !verdicts.is_empty() {
            break;
        }
    }
    let stats = finish(&ctx, monitor, index).await;
    let violations = verdicts.all();
    drop(ctx);
    let kept = match Arc::try_unwrap(world) {
        Ok(mut world) if options.keep_all || (!violations.is_empty() && options.keep_failed) => {
            Some(world.keep())
        }
        _ => None,
    };
    Ok(Outcome {
        seed: schedule.seed,
        brokers: schedule.brokers,
        steps: index,
        violations,
        stats,
        kept,
        elapsed: started.elapsed(),
    })
}

/// Plays one epoch's steps from step `index` on: each call starts and runs on, each fault
/// strikes; then waits for every call and every fault's undoing. Returns the next index.
async fn play_epoch(ctx: &Arc<Ctx>, epoch: &[crate::schedule::Step], mut index: usize) -> usize {
    let mut calls = JoinSet::new();
    let mut undo = Vec::new();
    for s in epoch {
        tokio::time::sleep(Duration::from_millis(s.after_ms)).await;
        ctx.step.store(index + 1, Ordering::SeqCst);
        match &s.action {
            Action::Call { broker, op } => {
                let (ctx, op, broker) = (ctx.clone(), op.clone(), *broker);
                calls.spawn(async move { ctx.run_call(index, broker, &op).await });
            }
            Action::Fault(fault) => undo.extend(faults::inject(ctx, *fault).await),
        }
        index += 1;
    }
    while calls.join_next().await.is_some() {}
    for task in undo {
        let _ = task.await;
    }
    index
}

/// Closes every broker as a host would and checks what must hold after: nothing of the
/// soak left running, the database intact, the key on no disk. Returns the run's stats.
async fn finish(ctx: &Ctx, monitor: Monitor, steps: usize) -> Stats {
    ctx.world.close_brokers().await;
    checks::no_leftovers(ctx, "after every broker closed").await;
    checks::database_intact(ctx);
    checks::key_never_on_disk(ctx);
    let samples = monitor.stop();
    if samples == 0 {
        ctx.violation(
            Invariant::OneWorkerPerChild,
            "the kernel monitor took no sample",
        );
    }
    let mut stats = ctx.stats().clone();
    stats.steps = steps as u64;
    stats.samples = samples;
    stats
}

/// The shortest prefix of `schedule` that still fails, found by bisecting between a prefix
/// that passes (none) and one that failed (`failing` steps). Each probe is a whole run;
/// `budget` bounds the time spent.
pub async fn shrink(
    schedule: &Schedule,
    failing: usize,
    options: &Options,
    budget: Duration,
) -> usize {
    let started = Instant::now();
    let options = &Options {
        keep_failed: false,
        keep_all: false,
        verbose: false,
        ..options.clone()
    };
    let (mut passing, mut failing) = (0usize, failing);
    while failing - passing > 1 && started.elapsed() < budget {
        let mid = passing + (failing - passing) / 2;
        let probe = schedule.prefix(mid);
        let failed = match run(&probe, options).await {
            Ok(outcome) => {
                eprintln!(
                    "soak shrink: seed {} prefix {mid}: {}",
                    schedule.seed,
                    if outcome.failed() { "fails" } else { "passes" }
                );
                outcome.failed()
            }
            Err(e) => {
                eprintln!(
                    "soak shrink: seed {} prefix {mid}: could not run: {e}",
                    schedule.seed
                );
                false
            }
        };
        if failed {
            failing = mid;
        } else {
            passing = mid;
        }
    }
    failing
}
