//! The soak's command line: its arguments, and the soak they ask for (the fixed seeds, a
//! replayed seed or prefix, or fresh seeds for some minutes) with its lines and verdict.
//! `src/main.rs` runs it under a runtime that tears the world down on SIGINT or SIGTERM; the
//! fixed-seeds test runs it in-process.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::report;
use crate::run::{self, Options};
use crate::schedule::{Schedule, Shape};
use crate::stats::Stats;
use crate::verdict::Violation;

/// The seeds `cargo xtask test` runs: one, two and three brokers.
pub const FIXED_SEEDS: &[u64] = &[11, 23, 5];

/// The seed `cargo xtask test` runs for isolated checkouts, over [`ISOLATED_EPOCHS`]
/// epochs (`cargo xtask soak --seed 18 --epochs 2`, about 8 s): two brokers, three isolated
/// coders spawned in its first epoch, applied (raced from both brokers, landed as a commit)
/// and discarded in its second.
pub const ISOLATED_SEED: u64 = 18;
/// The epochs of [`ISOLATED_SEED`]'s run.
pub const ISOLATED_EPOCHS: usize = 2;

const USAGE: &str =
    "usage: subzero-soak [--seed S | --seeds S,S,… | --minutes N] [--steps N] [--epochs E]
                    [--brokers B] [--bin-dir DIR] [--report FILE] [--no-shrink] [--settle-s S]
  (no seed option)  the fixed seeds `cargo xtask test` runs
  --seed S          replay seed S (its schedule is the same everywhere)
  --steps N         play only the first N steps of the schedule (a shrunk replay)
  --minutes N       fresh seeds until N minutes have passed
  --epochs E        epochs per run (default 8); --brokers B overrides the seed's 1–3
  --report FILE     write the markdown report there
  --keep            keep every run's directory (a failing run's is always kept)
  --strict          fail (instead of skipping) where the soak cannot run: it needs root to mount
                    the state directory's tmpfs and to read the workers' descriptors";

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Args {
    pub seeds: Vec<u64>,
    pub minutes: Option<f64>,
    pub steps: Option<usize>,
    pub shape: Shape,
    pub bin_dir: PathBuf,
    pub report: Option<PathBuf>,
    pub shrink: bool,
    pub settle: Duration,
    pub strict: bool,
    pub keep: bool,
}

/// The arguments (without the program name), or the message and usage to print.
pub fn parse(given: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        seeds: FIXED_SEEDS.to_vec(),
        minutes: None,
        steps: None,
        shape: Shape::default(),
        bin_dir: default_bin_dir(),
        report: None,
        shrink: true,
        settle: Duration::from_secs(120),
        strict: false,
        keep: false,
    };
    let mut it = given.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next().ok_or_else(|| {
                format!(
                    "{flag} needs a value
{USAGE}"
                )
            })
        };
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--seed" => args.seeds = vec![number(value()?)?],
            "--seeds" => {
                args.seeds = value()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<u64>()
                            .map_err(|e| format!("--seeds {s}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--minutes" => {
                args.minutes = Some(value()?.parse().map_err(|e| format!("--minutes: {e}"))?);
            }
            "--steps" => args.steps = Some(number(value()?)? as usize),
            "--epochs" => args.shape.epochs = number(value()?)? as usize,
            "--brokers" => args.shape.brokers = Some(number(value()?)?.clamp(1, 3) as usize),
            "--bin-dir" => args.bin_dir = PathBuf::from(value()?),
            "--report" => args.report = Some(PathBuf::from(value()?)),
            "--no-shrink" => args.shrink = false,
            "--strict" => args.strict = true,
            "--keep" => args.keep = true,
            "--settle-s" => args.settle = Duration::from_secs(number(value()?)?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => {
                return Err(format!(
                    "unknown argument {other}
{USAGE}"
                ));
            }
        }
    }
    Ok(args)
}

/// The directory of this executable: `cargo build` puts the soak beside `subzero`.
fn default_bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_default()
}

/// Plays every seed asked for; whether the soak passed (or, not strict, was skipped).
pub async fn soak(args: Args) -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "subzero-soak: {} the soak needs root: it mounts a tmpfs over the state directory \
             (the full-disk fault) and reads the workers' descriptors in /proc (the kernel \
             monitor); CI runs as root",
            if args.strict { "FAILED:" } else { "SKIPPED:" }
        );
        return !args.strict;
    }
    let options = Options {
        bin_dir: args.bin_dir.clone(),
        settle_bound: args.settle,
        stop_on_violation: true,
        verbose: true,
        keep_failed: true,
        keep_all: args.keep,
    };
    let started = Instant::now();
    let mut total = Stats::default();
    let mut found: Vec<(u64, Violation)> = Vec::new();
    let mut seeds = args.seeds.clone().into_iter();
    let mut fresh = fresh_seed();
    loop {
        let seed = match args.minutes {
            Some(minutes) if started.elapsed().as_secs_f64() > minutes * 60.0 => break,
            Some(_) => {
                fresh = fresh.wrapping_add(1);
                fresh
            }
            None => match seeds.next() {
                Some(seed) => seed,
                None => break,
            },
        };
        match one_seed(seed, &args, &options).await {
            Ok((stats, violations)) => {
                total.merge(&stats);
                found.extend(violations.into_iter().map(|v| (seed, v)));
            }
            Err(e) => {
                eprintln!("subzero-soak: seed {seed} could not run: {e}");
                return false;
            }
        }
    }
    close(&args, &total, &found, started.elapsed())
}

/// Plays one seed (its prefix when `--steps` is given); a failing seed is shrunk to its
/// shortest failing prefix and the line that replays it is printed.
async fn one_seed(
    seed: u64,
    args: &Args,
    options: &Options,
) -> Result<(Stats, Vec<Violation>), String> {
    let full = Schedule::generate(seed, args.shape);
    let schedule = match args.steps {
        Some(n) => full.prefix(n),
        None => full.clone(),
    };
    let outcome = run::run(&schedule, options).await?;
    summarize(&outcome, args);
    if outcome.failed() {
        let shortest = if args.shrink {
            // Each probe is a whole run: bounded, so a CI failure still ends in time.
            let budget = Duration::from_secs(if args.strict { 10 * 60 } else { 30 * 60 });
            run::shrink(&schedule, outcome.steps, options, budget).await
        } else {
            outcome.steps
        };
        eprintln!(
            "soak: seed {seed} FAILED; shortest failing prefix: {shortest} of {} steps
  \
             replay: cargo xtask soak --seed {seed} --steps {shortest}{}",
            full.len(),
            shape_flags(args)
        );
    }
    Ok((outcome.stats, outcome.violations))
}

/// The closing line, the report when asked for, and whether no invariant was violated.
fn close(args: &Args, total: &Stats, found: &[(u64, Violation)], took: Duration) -> bool {
    let minutes = took.as_secs_f64() / 60.0;
    let text = report::markdown("Fault soak", total, found, minutes);
    if let Some(path) = &args.report
        && let Err(e) = std::fs::write(path, &text)
    {
        eprintln!("subzero-soak: cannot write {}: {e}", path.display());
    }
    eprintln!(
        "soak: {} runs, {} calls, {} faults, {} violations in {minutes:.1} min",
        total.runs,
        total.total_calls(),
        total.faults.values().map(|(a, _)| a).sum::<u64>(),
        found.len()
    );
    found.is_empty()
}

fn summarize(outcome: &run::Outcome, args: &Args) {
    let s = &outcome.stats;
    let settle = s
        .settle_distribution()
        .map(|(_, median, _, max)| format!("settle median {median} ms, max {max} ms"))
        .unwrap_or_default();
    eprintln!(
        "soak: seed {} ({} brokers): {} steps, {} calls, {} faults, {settle}, {:.1} s: {}",
        outcome.seed,
        outcome.brokers,
        outcome.steps,
        s.total_calls(),
        s.faults.values().map(|(a, _)| a).sum::<u64>(),
        outcome.elapsed.as_secs_f64(),
        if outcome.failed() { "VIOLATIONS" } else { "ok" }
    );
    const SHOWN: usize = 8;
    for v in outcome.violations.iter().take(SHOWN) {
        eprintln!("  violated {v}");
    }
    if outcome.violations.len() > SHOWN {
        eprintln!(
            "  … and {} more violations",
            outcome.violations.len() - SHOWN
        );
    }
    if let Some(dir) = &outcome.kept {
        eprintln!("  the run's directory is kept: {}", dir.display());
    }
    let _ = args;
}

fn shape_flags(args: &Args) -> String {
    let mut flags = String::new();
    if args.shape.epochs != Shape::default().epochs {
        flags.push_str(&format!(" --epochs {}", args.shape.epochs));
    }
    if let Some(b) = args.shape.brokers {
        flags.push_str(&format!(" --brokers {b}"));
    }
    flags
}

fn fresh_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() * 1000)
        .unwrap_or(1)
}
