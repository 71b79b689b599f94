//! `subzero gc`: remove what isolated checkouts left behind, so nothing leaks.
//!
//! What callers may rely on:
//! - Without `--apply` nothing is touched: the state is read read-only and the command
//!   prints what it would remove and the bytes that would free.
//! - Only checkouts whose state last changed more than `--older-than` days ago (default:
//!   `[isolation] keep_days`) are collected: `applied`, `discarded` and `removed` ones lose
//!   what is left of them (directory, the broker's `.own` notes, the
//!   `refs/subzero/{base,children}/<child>` refs) and keep their state; `settled_unchanged`
//!   ones, and `prepared` ones whose child has no active run, become `removed` (the core's
//!   decision, written over the row it was made from) and lose the same.
//! - A `settled_changed` or `in_use` checkout is never touched: an unapplied change goes
//!   only by an explicit discard (`subzero_apply` with `discard: true`). The output counts
//!   them (`kept: N with unapplied changes`).
//! - No broker is needed, and a running one is safe: each checkout is collected under its
//!   child's lock and through the store's normal transactions. One that is busy or was
//!   changed meanwhile is reported and skipped; the exit code is 1 only when something
//!   failed outright.
//! - On a terminal, paths and messages from outside are shown escaped
//!   (`crate::terminal_text`).

mod plan;
mod print;
mod sweep;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use subzero_core::{Described, ErrorCode};
use subzero_protocol::timestamp::rfc3339_millis;
use subzero_runtime::config::Config;
use subzero_runtime::paths::{PathEnv, resolve_config_path};
use subzero_runtime::store::{Store, StoreOptions, Timestamp};

use crate::inspect::state::ReadOnlyState;
use crate::inspect::{self, InspectError, Outcome, StateDirArg, written};
use crate::terminal_text::Printing;
use plan::Plan;
use sweep::Swept;

/// Flags of `subzero gc`.
#[derive(Debug, Clone, clap::Args)]
pub struct GcArgs {
    /// Remove what is listed (without it, a dry run: nothing is touched).
    #[arg(long)]
    pub apply: bool,
    /// Only checkouts whose state last changed more than DAYS days ago (default: the
    /// configuration's `[isolation] keep_days`, 7 unless set).
    #[arg(long, value_name = "DAYS")]
    pub older_than: Option<u32>,
    /// The configuration file (default: $SUBZERO_CONFIG, else $XDG_CONFIG_HOME/subzero/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

/// `subzero gc`.
pub fn run(args: GcArgs) -> u8 {
    let mut failed = false;
    let outcome = collect(&args, &mut failed);
    match inspect::exit_code(outcome) {
        0 => u8::from(failed),
        code => code,
    }
}

fn collect(args: &GcArgs, failed: &mut bool) -> Outcome {
    let days = match args.older_than {
        Some(days) => days,
        None => keep_days(args)?,
    };
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let printing = Printing::of_stdout(false);
    let mut out = std::io::stdout().lock();
    let Ok(store) = state.store() else {
        return written(writeln!(
            out,
            "nothing to collect: there is no state database at {} yet",
            printing.field(&state.paths().database().display().to_string())
        ));
    };
    let runtime = inspect::runtime()?;
    let plan = runtime.block_on(plan::plan(&state, store, &bound(days)?, days))?;
    let color = std::io::stdout().is_terminal();
    if !args.apply || plan.candidates.is_empty() {
        *failed = !plan.problems.is_empty();
        return written(print::dry_run(&mut out, &plan, color, printing));
    }
    let swept = runtime.block_on(apply(&state, &plan))?;
    *failed = !plan.problems.is_empty() || swept.iter().any(Swept::failed);
    written(print::applied(&mut out, &plan, &swept, color, printing))
}

/// Collect each candidate of `plan` through a store opened for writing (the read-only
/// open before has checked that the database exists and is at this schema version, so
/// this open neither creates nor migrates it).
async fn apply(state: &ReadOnlyState, plan: &Plan) -> Result<Vec<Swept>, InspectError> {
    let store = Store::open(&state.paths().database(), StoreOptions::default())?;
    let mut swept = Vec::new();
    for candidate in &plan.candidates {
        swept.push(sweep::sweep(&store, state.paths(), candidate).await);
    }
    store.close();
    Ok(swept)
}

/// `[isolation] keep_days` of the configuration `subzero mcp` would read.
fn keep_days(args: &GcArgs) -> Result<u32, InspectError> {
    let path = resolve_config_path(args.config.as_deref(), &PathEnv::from_process())?;
    let config = Config::load(&path).map_err(|e| {
        InspectError::new(
            e.code(),
            format!(
                "{}; fix it, or pass --older-than DAYS to collect without it",
                e.message()
            ),
        )
    })?;
    Ok(config.isolation.keep_days)
}

/// The time `days` days ago: checkouts last changed before it are old enough.
fn bound(days: u32) -> Result<Timestamp, InspectError> {
    let ago = Duration::from_secs(u64::from(days) * 86_400);
    let at = SystemTime::now()
        .checked_sub(ago)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    rfc3339_millis(at).parse().map_err(|e| {
        InspectError::new(
            ErrorCode::Internal,
            format!("cannot write the time {days} days ago as a timestamp: {e}"),
        )
    })
}
