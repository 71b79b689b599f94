//! `cargo xtask bench`: measures the figures of issues 8, 22, 28 and 37 against the release
//! `subzero` binary, beside its peers, and writes `docs/benchmarks.md`. Exits non-zero,
//! naming it, when a figure misses its goal or a scenario fails.
//!
//! usage: subzero-bench --subzero PATH --out PATH [--quick] [--only SECTION] [--command TEXT]
//!        [--host-cost JSON]

mod args;
mod broker;
mod checkouts;
mod env;
mod footprint;
mod hostile;
mod hwm;
mod machine;
mod peers;
mod plan;
mod procs;
mod real_model;
mod report;
mod sections;
mod shutdown;
mod sink;
mod stats;
mod store;

use std::time::Instant;

use plan::Plan;
use report::Report;
use sink::Sink;

pub type Fail = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("subzero-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Fail> {
    let args = args::parse_args()?;
    let plan = Plan::new(args.quick);
    let exe = args.subzero.canonicalize()?;
    let machine = machine::Machine::probe();
    let started = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let clock = Instant::now();
    let mut sink = Sink::default();

    let root = std::env::current_dir()?;
    let wants = |section: &str| args.only.as_deref().is_none_or(|only| only == section);
    if wants("lean") {
        sections::lean::measure(&exe, &root, &plan, &mut sink).await;
    }
    if wants("processes") {
        sections::processes::measure(&exe, &plan, &mut sink).await;
    }
    if wants("store") {
        sections::store::measure(&exe, &plan, &mut sink).await;
    }
    if wants("isolation") {
        sections::isolation::measure(&plan, &mut sink);
    }
    if wants("real-model") {
        sections::real_model::measure(&exe, &plan, &mut sink).await;
    }
    if wants("install") {
        sections::install::measure(&exe, args.dist.as_deref(), plan.runs, &mut sink);
    }
    if wants("host") {
        sections::host::measure(args.host_cost.as_deref(), &mut sink);
    }

    let md = Report {
        machine: &machine,
        command: &args.command,
        quick: args.quick,
        started,
        total_seconds: clock.elapsed().as_secs_f64(),
        figures: &sink.figures,
        ratios: &sink.ratios,
        notes: &sink.notes,
    }
    .markdown();
    std::fs::write(&args.out, md)?;
    eprintln!("wrote {}", args.out.display());
    let regressions = sink.regressions();
    if regressions.is_empty() {
        return Ok(());
    }
    eprintln!("\nsubzero-bench: {} regression(s):", regressions.len());
    for line in &regressions {
        eprintln!("  MISSED {line}");
    }
    Err(format!(
        "{} figure(s) missed their goal or failed",
        regressions.len()
    )
    .into())
}
