//! `subzero doctor`: is this machine ready to run Subzero, and if not, what to do.
//!
//! What callers may rely on:
//! - Every check reports pass, warn or fail, and every warn and fail says how to fix it.
//! - The exit code is 1 when any check fails (warnings do not fail), 0 otherwise.
//! - Isolated checkouts are counted by state and measured on disk; a directory the ledger
//!   does not know is a warning (`checkouts.rs`).
//! - Nothing is written: no state directory or database is created, no database is
//!   migrated, no lock is taken (held locks are found by scanning `/proc`).
//! - No secret is printed: credentials are resolved into memory and dropped; only their
//!   configured source (variable name or file path) is named.
//! - `--json` prints `{"ok": bool, "checks": [{name, status, detail, fix?}]}`.
//! - On a terminal, text from outside (a model URL, an error, a path) is shown escaped
//!   (`crate::terminal_text`).

mod build;
mod checkouts;
mod config;
mod containment;
mod kernel;
mod model;
mod report;
mod state;
mod worker;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use subzero_runtime::RuntimeResult;
use subzero_runtime::config::Config;
use subzero_runtime::paths::{PathEnv, resolve_config_path, resolve_state_dir};

use crate::terminal_text::Printing;
use report::{Check, Report};

/// Flags of `subzero doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// The state directory (default: $SUBZERO_STATE_DIR, else $XDG_STATE_HOME/subzero).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The configuration file (default: $SUBZERO_CONFIG, else $XDG_CONFIG_HOME/subzero/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The directory the test worker starts in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Probe this model endpoint (`GET URL/models`) with --credential.
    #[arg(long, value_name = "URL", requires = "credential")]
    pub model: Option<String>,
    /// The configured credential to probe --model with.
    #[arg(long, value_name = "REF", requires = "model")]
    pub credential: Option<String>,
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run every check, print the report, return the exit code.
pub fn run(args: DoctorArgs) -> u8 {
    let report = diagnose(&args);
    let printing = Printing::of_stdout(false);
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        writeln!(out, "{}", printing.json(&report.to_json().to_string()))
    } else {
        report.write(&mut out, std::io::stdout().is_terminal(), printing)
    };
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        let _ = writeln!(
            std::io::stderr(),
            "error[internal]: cannot write the report: {e}"
        );
        return 1;
    }
    u8::from(report.failed())
}

fn diagnose(args: &DoctorArgs) -> Report {
    let env = PathEnv::from_process();
    let mut report = Report::default();
    let config_path = resolve_config_path(args.config.as_deref(), &env);
    let config = check_configuration(&config_path, &mut report);
    let state_dir = resolve_state_dir(args.state_dir.as_deref(), &env);
    match &state_dir {
        Ok(root) => {
            report.extend(state::check_state(root));
            report.extend(checkouts::check_checkouts(root));
        }
        Err(e) => report.add(Check::fail(
            "state dir",
            e.to_string(),
            "pass --state-dir DIR or set SUBZERO_STATE_DIR",
        )),
    }
    report.extend(kernel::check_kernel(config.as_ref()));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report.add(Check::fail(
                "runtime",
                format!("cannot start the async runtime: {e}"),
                "check the process limits (ulimit -n, -u)",
            ));
            return report;
        }
    };
    report.add(runtime.block_on(check_worker(args)));
    report.add(build::check_build());
    // The executable a broker would start its workers from.
    let worker_exe =
        std::env::current_exe().map(|exe| subzero_runtime::supervisor::worker_executable(&exe));
    if let (Ok(exe), Some(workspace)) = (&worker_exe, doctor_workspace(args)) {
        report.add(runtime.block_on(worker::check_pi_worker(exe, &workspace, config.as_ref())));
    }
    if let (Ok(exe), Some(workspace)) = (&worker_exe, doctor_workspace(args)) {
        let hide = hidden_from_tools(&state_dir, &config_path, config.as_ref());
        report.extend(runtime.block_on(containment::check_process_containment(
            exe,
            &workspace,
            config.as_ref(),
            hide,
        )));
    }
    if let (Some(url), Some(credential), Ok(path)) = (&args.model, &args.credential, &config_path) {
        report.add(runtime.block_on(model::check_model(url, credential, config.as_ref(), path)));
    }
    report
}

/// The configuration file, its entries and its credentials; the configuration when it can
/// be used.
fn check_configuration(
    config_path: &RuntimeResult<PathBuf>,
    report: &mut Report,
) -> Option<Config> {
    match config_path {
        Ok(path) => {
            let (check, config) = config::check_config(path);
            report.add(check);
            report.extend(config::check_config_entries(path));
            if let Some(config) = &config {
                report.extend(config::check_credentials(config, path));
            }
            config
        }
        Err(e) => {
            report.add(Check::fail(
                "config",
                e.to_string(),
                "pass --config FILE or set SUBZERO_CONFIG",
            ));
            None
        }
    }
}

/// What a broker with this configuration would hide from its tools (nothing when the state
/// directory or the configuration file is unknown).
fn hidden_from_tools(
    state_dir: &RuntimeResult<PathBuf>,
    config_path: &RuntimeResult<PathBuf>,
    config: Option<&Config>,
) -> Vec<PathBuf> {
    match (state_dir, config_path) {
        (Ok(state), Ok(path)) => subzero_runtime::paths::hidden_from_tools(
            state,
            path,
            config
                .iter()
                .flat_map(|c| c.credentials.values().filter_map(|e| e.file.clone())),
        ),
        _ => Vec::new(),
    }
}

/// The directory a doctor's test worker starts in, when it is one.
fn doctor_workspace(args: &DoctorArgs) -> Option<PathBuf> {
    args.workspace
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .filter(|dir| dir.is_dir())
}

async fn check_worker(args: &DoctorArgs) -> Check {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            return Check::fail(
                "worker",
                format!("cannot locate the subzero executable: {e}"),
                "run subzero by its full path",
            );
        }
    };
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => match std::env::current_dir() {
            Ok(dir) => dir,
            Err(e) => {
                return Check::fail(
                    "worker",
                    format!("cannot read the current directory: {e}"),
                    "cd into a directory that exists, or pass --workspace DIR",
                );
            }
        },
    };
    if !workspace.is_dir() {
        return Check::fail(
            "worker",
            format!("workspace {} is not a directory", workspace.display()),
            "pass --workspace DIR naming an existing directory",
        );
    }
    let worker_exe = subzero_runtime::supervisor::worker_executable(&exe);
    if let Some(why) = subzero_runtime::supervisor::worker_missing(&worker_exe) {
        return Check::fail(
            "worker",
            why,
            "install subzero-worker next to subzero: `cargo install --path crates/subzero` installs the three binaries",
        );
    }
    worker::check_worker(&worker_exe, &workspace).await
}
