//! `subzero wait CHILD [--run RUN]`: blocks until the run has ended, then prints it as one
//! line of JSON, `{childId, label?, run}` (`run` as `lastRun` shows it, its preview cut at
//! 1,024 bytes) — what Pi's wake extension hands its parent.
//!
//! Read-only like the other inspection commands; it reads the run every 250 ms. On a
//! terminal the JSON's control and bidi characters are escaped (`terminal_text`). It ends with
//! its parent process (it asks the kernel for SIGTERM when the parent dies), so an extension
//! that started it and was killed leaves nothing behind.

use std::io::Write;
use std::time::Duration;

use serde::Serialize;
use subzero_core::{ChildId, ErrorCode, RunId};
use subzero_protocol as p;
use subzero_runtime::broker::settled_run;

use super::state::ReadOnlyState;
use super::{InspectError, Outcome, StateDirArg, document, runtime, written};
use crate::terminal_text::Printing;

/// Flags of `subzero wait`.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// The child (`ch_…`).
    #[arg(value_name = "CHILD")]
    pub child: String,
    /// The run to wait for (`run_…`); default: the child's active run, else its last one.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

/// How often the run is read.
const POLL: Duration = Duration::from_millis(250);
/// The longest preview printed.
const PREVIEW_LIMIT: usize = 1024;

/// What `wait` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Waited {
    child_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    run: p::LastRun,
}

pub(super) fn run(args: WaitArgs) -> Outcome {
    end_with_parent();
    let invalid =
        |e: subzero_core::IdParseError| InspectError::new(ErrorCode::InvalidRequest, e.to_string());
    let child = ChildId::parse(&args.child).map_err(invalid)?;
    let wanted = args
        .run
        .as_deref()
        .map(RunId::parse)
        .transpose()
        .map_err(invalid)?;
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let scope = state.child_scope(child)?;
    let store = state.store()?;
    let waited = runtime()?.block_on(async {
        let mut target = wanted;
        loop {
            let row = store.child(&scope, child).await?;
            let runs = store.runs(&scope, child).await?;
            let newest = || runs.iter().max_by_key(|r| r.ordinal).map(|r| r.run_id);
            let run = target.or(row.active_run_id).or_else(newest);
            target = run;
            let Some(found) = run.and_then(|run| runs.iter().find(|r| r.run_id == run)) else {
                return Err(InspectError::new(
                    ErrorCode::NotFound,
                    format!(
                        "child {child} has no run {}; `subzero show {child}` shows its last one",
                        run.map_or_else(|| "yet".to_owned(), |r| r.to_string())
                    ),
                )
                .into());
            };
            if found.status.is_terminal() {
                let run = settled_run(found, PREVIEW_LIMIT)
                    .map_err(|e| InspectError::new(ErrorCode::Internal, e.message().to_owned()))?;
                return Ok::<_, super::Failure>(Waited {
                    child_id: child.to_string(),
                    label: row.label.clone(),
                    run,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    })?;
    let json = document::json(&waited)?;
    // On a terminal, what the child wrote is shown escaped, as `show --json` does.
    let printing = Printing::of_stdout(false);
    written(writeln!(
        std::io::stdout().lock(),
        "{}",
        printing.json(&json)
    ))
}

/// Ask the kernel to end this process when its parent dies (a waiting extension killed with
/// its host must not leave a waiter polling for ever).
fn end_with_parent() {
    let parent = rustix::process::getppid();
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
    // The parent may have died before the request: then this process was re-parented.
    if rustix::process::getppid() != parent {
        std::process::exit(1);
    }
}
