//! Lean children (issue 28), side by side with the peers in the same run: what a child
//! costs while it waits on its model, how fast a worker starts, how fast the broker
//! answers `initialize`, what the broker weighs — and the same figures for the Node
//! reference MCP server and Pi's own worker process, with the ratios.

use std::path::Path;

use crate::footprint::child_tree;
use crate::plan::Plan;
use crate::report::{Ratio, Target};
use crate::sink::{Sink, one};
use crate::{Fail, broker, peers};

pub const LEAN: &str = "Lean children";
pub const PEERS: &str = "Beside the peers";

/// A template on the Pi worker, for the Pi child's figures.
const PI_TEMPLATE: &str = r#"[templates.pi-reader]
description = "Reads on the Pi worker"
instructions = "You are a researcher."
tools = ["read", "grep", "find", "ls"]
worker = "pi"
"#;

/// What the ratios are computed from: the medians measured here.
#[derive(Default)]
struct Ours {
    tree_rss: Option<f64>,
    tree_pss: Option<f64>,
    worker_start: Option<f64>,
    cold_start: Option<f64>,
    idle_rss: Option<f64>,
}

/// Every figure of the lean section and the ratios to the peers, in the order of the report.
pub async fn measure(exe: &Path, root: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.runs;
    let mut ours = Ours::default();
    match std::fs::metadata(exe) {
        Ok(meta) => sink.add(
            LEAN,
            "release binary size (`subzero`)",
            "MiB",
            one(meta.len() as f64 / 1024.0 / 1024.0),
            None,
            &format!("`target/release/subzero`, {}, symbols stripped, thin LTO, relative relocations packed (`DT_RELR`); the broker and the CLI, no worker code (`subzero-worker` and `subzero-hold` are installed beside it)", linkage(exe)),
        ),
        Err(e) => sink.failed("binary size", &e.into()),
    }
    rust_child(exe, n, sink, &mut ours).await;
    worker_starts(exe, root, n, sink, &mut ours).await;
    broker_figures(exe, n, sink, &mut ours).await;
    pi_child(exe, n, sink).await;
    node_server_figures(root, n, sink, &ours).await;
    pi_rpc_figures(root, n, sink, &ours).await;
}

async fn rust_child(exe: &Path, n: usize, sink: &mut Sink, ours: &mut Ours) {
    eprintln!("a child's tree while it waits on its model…");
    match child_tree(exe, "", "researcher", n).await {
        Ok(tree) => {
            let how = format!(
                "every process of one researcher child (now: {}) while its first model request hangs, under a live broker; `/proc/PID/smaps_rollup` Rss and Pss, `status` VmHWM, summed; one child at a time",
                tree.shape
            );
            ours.tree_rss = Some(tree.rss.median());
            ours.tree_pss = Some(tree.pss.median());
            sink.add(LEAN, "a child's tree waiting on its model: processes", "", tree.processes, Some(Target::MedianAtMost(2.0)), "the worker (`subzero-worker`, the whole tree: no keeper in between) and its lock holder beside it (`subzero-hold`, outside the tree)");
            sink.add(
                LEAN,
                "a child's tree waiting on its model: RSS",
                "MiB",
                tree.rss,
                Some(Target::MedianAtMost(12.0)),
                &how,
            );
            sink.add(LEAN, "a child's tree waiting on its model: PSS", "MiB", tree.pss, Some(Target::MedianAtMost(8.0)), "the same processes, proportional set size (pages shared with the broker and libc counted in part)");
            sink.add(
                LEAN,
                "a child's tree waiting on its model: VmHWM",
                "MiB",
                tree.hwm,
                None,
                "the same processes, their peak RSS since they started",
            );
            sink.add(
                LEAN,
                "broker RSS with that one child",
                "MiB",
                tree.broker_rss,
                None,
                "the broker's VmRSS at the same moment",
            );
        }
        Err(e) => sink.failed("child tree", &e),
    }
}

async fn worker_starts(exe: &Path, root: &Path, n: usize, sink: &mut Sink, ours: &mut Ours) {
    eprintln!("worker start…");
    for namespace in [true, false] {
        match broker::worker_start(exe, n, namespace, false, Vec::new()).await {
            Ok((ms, mode)) => {
                let (label, how, target) = if namespace {
                    ours.worker_start = Some(ms.median());
                    (
                        "worker start → hello, with all namespaces",
                        format!(
                            "the broker's spawner (`subzero_runtime::supervisor::Spawner`) clones `subzero-worker worker` straight into new PID + mount namespaces (a user namespace too when not root), mounts its /proc and execs it, with no process in between; the worker probes the tools' mount namespace for the three `--hide` paths a broker passes; spawn request → hello parsed; the hello reported `{mode}`"
                        ),
                        Some(Target::MedianAtMost(4.0)),
                    )
                } else {
                    (
                        "worker start → hello, without a namespace",
                        format!(
                            "the same spawner on the `[containment] process = \"subreaper\"` path (a plain child), with the same `--hide` paths; the hello reported `{mode}`"
                        ),
                        None,
                    )
                };
                sink.add(LEAN, label, "ms", ms, target, &how);
            }
            Err(e) => sink.failed("worker start", &e),
        }
    }
    match broker::worker_start(exe, n, true, true, Vec::new()).await {
        Ok((ms, mode)) => sink.add(LEAN, "worker start → hello, with all namespaces but the tools' network namespace", "ms", ms, None, &format!("as `with all namespaces`, with `[containment] network = \"off\"` (what an `open` grant needs): the difference to it is what the tools' network namespace (loopback up, the proxy's socket bound) costs at start; the hello reported `{mode}`")),
        Err(e) => sink.failed("worker start without the network namespace", &e),
    }
    eprintln!("a tool's first connect…");
    match broker::first_connect(exe, n).await {
        Ok(c) => {
            sink.add(LEAN, "a tool's first connect through the allowlist proxy", "ms", c.proxy_ms, None, "a coder's `bash` runs Python, which times connect to 127.0.0.1:3128 (the proxy's socket in the tools' network namespace) and `CONNECT 127.0.0.2:P` until the `200` — the worker admitted the listed address (`Allowlist::admit`) and connected outside; one spawn per sample, through `subzero mcp`");
            sink.add(LEAN, "a tool's first connect under `open`", "ms", c.open_ms, None, "the same Python, straight to 127.0.0.2:P from a template with `network = \"open\"` (no namespace, no proxy)");
        }
        Err(e) => sink.failed("a tool's first connect", &e),
    }
    match pi_engine(exe, root) {
        Ok(engine) => match broker::worker_start(exe, n, true, false, engine).await {
            Ok((ms, mode)) => sink.add(LEAN, "Pi worker start → hello, with all namespaces", "ms", ms, None, &format!("the same spawner and namespaces, `subzero-worker worker --engine pi`: the init starts Node on `workers/pi` (Pi SDK), whose hello ends the figure; the hello reported `{mode}`")),
            Err(e) => sink.failed("Pi worker start", &e),
        },
        Err(e) => sink.failed("Pi worker start", &e),
    }
}

/// `--engine pi …` for the checkout's `workers/pi`.
fn pi_engine(exe: &Path, root: &Path) -> Result<Vec<std::ffi::OsString>, Fail> {
    let config = subzero_runtime::config::PiWorkerConfig {
        dir: Some(root.join("workers/pi")),
        ..Default::default()
    };
    Ok(subzero_runtime::workers::locate_pi(&config, exe)?.engine_args())
}

async fn broker_figures(exe: &Path, n: usize, sink: &mut Sink, ours: &mut Ours) {
    eprintln!("broker cold start…");
    match broker::cold_start(exe, n) {
        Ok(cold) => {
            ours.cold_start = Some(cold.initialize_ms.median());
            ours.idle_rss = Some(cold.idle_rss_mib.median());
            sink.add(LEAN, "broker cold start → `initialize` reply", "ms", cold.initialize_ms, Some(Target::MedianAtMost(3.0)), "spawn `subzero mcp` → its initialize response, raw JSON-RPC lines over stdio; existing state dir (a warm-up start created it); the state is opened and recovered once the client says `notifications/initialized` (sent after the reply is read), every tool call waits for it; each start follows the previous one's 200 ms RSS pause and exit, so it starts on idle CPUs, as a host's start does");
            sink.add(
                LEAN,
                "broker RSS, idle after `initialize`",
                "MiB",
                cold.idle_rss_mib,
                Some(Target::MedianAtMost(16.0)),
                "VmRSS 200 ms after the initialize reply, no children",
            );
        }
        Err(e) => sink.failed("cold start", &e),
    }
    match peers::line_echo_floor(n) {
        Ok(floor) => sink.add(
            LEAN,
            "the floor: `head -n 1` start → the line echoed",
            "ms",
            floor,
            None,
            "the same spawn, pipes, line and pause as the cold start above, for a program that only reads the line and writes it back: what process creation, exec and two pipe hops cost on this machine, under every cold start",
        ),
        Err(e) => sink.failed("cold start floor", &e),
    }
    eprintln!("four children…");
    match broker::four_children(exe, n).await {
        Ok(busy) => {
            sink.add(
                LEAN,
                "broker RSS, 4 children waiting on their model",
                "MiB",
                busy.broker_rss_mib,
                Some(Target::MedianAtMost(18.0)),
                "fresh broker, 4 researcher children whose model request hangs",
            );
            sink.add(
                LEAN,
                "worker RSS, each of 4 waiting children",
                "MiB",
                busy.worker_rss_mib,
                None,
                "each of the 4 workers above (n = 4 per run)",
            );
        }
        Err(e) => sink.failed("four children", &e),
    }
}

async fn pi_child(exe: &Path, n: usize, sink: &mut Sink) {
    eprintln!("a Pi child's tree while it waits on its model…");
    match child_tree(exe, PI_TEMPLATE, "pi-reader", n).await {
        Ok(tree) => {
            let how = format!(
                "as the researcher's tree above, for a template on `worker = \"pi\"` (now: {})",
                tree.shape
            );
            sink.add(
                LEAN,
                "a Pi child's tree waiting on its model: RSS",
                "MiB",
                tree.rss,
                None,
                &how,
            );
            sink.add(
                LEAN,
                "a Pi child's tree waiting on its model: PSS",
                "MiB",
                tree.pss,
                None,
                "the same processes, proportional set size",
            );
        }
        Err(e) => sink.failed("Pi child tree", &e),
    }
}

/// The Node reference MCP server's cold start and idle memory, against the broker's.
async fn node_server_figures(root: &Path, n: usize, sink: &mut Sink, ours: &Ours) {
    eprintln!("the Node reference MCP server…");
    match peers::node_reference_server(root, n) {
        Ok(node) => {
            ratio(
                sink,
                NODE,
                "cold start → `initialize` reply",
                node.start_ms.median(),
                ours.cold_start,
                "ms",
            );
            ratio(
                sink,
                NODE,
                "RSS idle after `initialize`",
                node.rss.median(),
                ours.idle_rss,
                "MiB",
            );
            sink.add(PEERS, "Node reference server: cold start → `initialize` reply", "ms", node.start_ms, None, "`node …/server-everything/dist/index.js stdio` (`@modelcontextprotocol/server-everything` 2026.8.31 on Node 22.23.3, `crates/subzero/benches/peers`); raw JSON-RPC lines, as for the broker");
            sink.add(
                PEERS,
                "Node reference server: RSS idle after `initialize`",
                "MiB",
                node.rss,
                None,
                "VmRSS 200 ms after its reply",
            );
        }
        Err(e) => sink.failed("Node reference server", &e),
    }
}

/// Pi's own worker process (`pi --mode rpc`): its start and its tree's memory while it
/// waits on its model, against a Subzero child's.
async fn pi_rpc_figures(root: &Path, n: usize, sink: &mut Sink, ours: &Ours) {
    eprintln!("Pi's worker process (pi --mode rpc)…");
    match peers::pi_rpc(root, n).await {
        Ok(pi) => {
            ratio(
                sink,
                PI_RPC,
                "a worker's tree waiting on its model, RSS",
                pi.rss.median(),
                ours.tree_rss,
                "MiB",
            );
            ratio(
                sink,
                PI_RPC,
                "a worker's tree waiting on its model, PSS",
                pi.pss.median(),
                ours.tree_pss,
                "MiB",
            );
            ratio(
                sink,
                PI_RPC,
                "worker start → ready",
                pi.start_ms.median(),
                ours.worker_start,
                "ms",
            );
            sink.add(PEERS, "Pi `--mode rpc`: start → first answer", "ms", pi.start_ms, None, "`pi --mode rpc --no-session` (Pi 1.6.0 from `crates/subzero/tests/hosts/pi`'s lockfile, Node 22.23.3): spawn → its answer to `get_state`");
            sink.add(PEERS, "Pi `--mode rpc`: tree waiting on its model, RSS", "MiB", pi.rss, None, "after a `prompt` whose model request (a scripted provider on loopback) hangs; every process of its tree, summed");
            sink.add(
                PEERS,
                "Pi `--mode rpc`: tree waiting on its model, PSS",
                "MiB",
                pi.pss,
                None,
                "the same processes, proportional set size",
            );
        }
        Err(e) => sink.failed("Pi --mode rpc", &e),
    }
}

const NODE: &str = "Node reference MCP server";
const PI_RPC: &str = "Pi `--mode rpc`";

/// A peer's median against ours: how many times more the peer takes.
fn ratio(
    sink: &mut Sink,
    peer: &'static str,
    what: &str,
    theirs: f64,
    ours: Option<f64>,
    unit: &'static str,
) {
    if let Some(ours) = ours {
        sink.ratios.push(Ratio {
            peer,
            what: what.to_owned(),
            ours,
            theirs,
            unit,
        });
    }
}

/// How the binary is linked, from its ELF program headers: a `PT_INTERP` header names the
/// dynamic loader it needs.
fn linkage(exe: &Path) -> String {
    const PT_INTERP: u32 = 3;
    let Ok(elf) = std::fs::read(exe) else {
        return "linkage unknown (unreadable)".to_string();
    };
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    // ELF64, little-endian: e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38.
    let (Some(phoff), Some(size), Some(count)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return "linkage unknown (not ELF64)".to_string();
    };
    let dynamic = (0..usize::from(count)).any(|i| {
        usize::try_from(phoff)
            .ok()
            .and_then(|off| u32_at(off + i * usize::from(size)))
            == Some(PT_INTERP)
    });
    if dynamic {
        "linked dynamically".to_string()
    } else {
        "linked statically (static-pie)".to_string()
    }
}
