//! `subzero-soak`: the seeded fault soak; `cargo xtask soak` builds and runs it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use subzero_soak::report;
use subzero_soak::run::{self, Options};
use subzero_soak::schedule::{Schedule, Shape};
use subzero_soak::stats::Stats;
use subzero_soak::verdict::Violation;

/// The seeds `cargo xtask test` runs: one, two and three brokers.
const FIXED_SEEDS: &[u64] = &[11, 23, 5];

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

struct Args {
    seeds: Vec<u64>,
    minutes: Option<f64>,
    steps: Option<usize>,
    shape: Shape,
    bin_dir: PathBuf,
    report: Option<PathBuf>,
    shrink: bool,
    settle: Duration,
    strict: bool,
    keep: bool,
}

fn parse() -> Result<Args, String> {
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
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
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
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
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

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("subzero-soak: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        // Interrupted, the soak's future is dropped, and with it each world: its processes
        // are killed and its tmpfs unmounted (a SIGKILL leaves both behind).
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(e) => {
                    eprintln!("subzero-soak: cannot watch SIGTERM: {e}");
                    return ExitCode::FAILURE;
                }
            };
        tokio::select! {
            code = soak(args) => code,
            _ = tokio::signal::ctrl_c() => interrupted("SIGINT"),
            _ = term.recv() => interrupted("SIGTERM"),
        }
    })
}

fn interrupted(signal: &str) -> ExitCode {
    eprintln!("subzero-soak: {signal}: the running world is torn down; no verdict");
    ExitCode::from(130)
}

async fn soak(args: Args) -> ExitCode {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "subzero-soak: {} the soak needs root: it mounts a tmpfs over the state directory \
             (the full-disk fault) and reads the workers' descriptors in /proc (the kernel \
             monitor); CI runs as root",
            if args.strict { "FAILED:" } else { "SKIPPED:" }
        );
        return if args.strict {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
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
                return ExitCode::FAILURE;
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
            "soak: seed {seed} FAILED; shortest failing prefix: {shortest} of {} steps\n  \
             replay: cargo xtask soak --seed {seed} --steps {shortest}{}",
            full.len(),
            shape_flags(args)
        );
    }
    Ok((outcome.stats, outcome.violations))
}

/// The closing line, the report when asked for, and the exit code.
fn close(args: &Args, total: &Stats, found: &[(u64, Violation)], took: Duration) -> ExitCode {
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
    if found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
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
