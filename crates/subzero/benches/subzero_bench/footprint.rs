//! What one child costs while it waits on its model: every process of its tree (for the
//! Rust worker one process; for the Pi worker its init and Node) and the lock holder the
//! broker starts beside it, each with RSS, PSS and VmHWM, summed per child — measured under
//! a live broker, as a user's machine has it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use subzero_testkit::Reply;

use crate::Fail;
use crate::env::{BenchEnv, ok};
use crate::procs::{descendants, rss_mib, status_kib, workers_of};
use crate::stats::Samples;

const LONG: Duration = Duration::from_secs(30);

/// One process's memory, from `/proc/PID/smaps_rollup` and `status`, in MiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss: f64,
    pub pss: f64,
    pub hwm: f64,
}

impl Memory {
    pub fn of(pid: u32) -> Option<Memory> {
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
        let field = |name: &str| -> Option<f64> {
            rollup
                .lines()
                .find(|l| l.starts_with(name) && l[name.len()..].starts_with(':'))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|kib| kib / 1024.0)
        };
        Some(Memory {
            rss: field("Rss")?,
            pss: field("Pss")?,
            hwm: status_kib(pid, "VmHWM")? as f64 / 1024.0,
        })
    }

    fn add(&mut self, other: Memory) {
        self.rss += other.rss;
        self.pss += other.pss;
        self.hwm += other.hwm;
    }
}

/// The processes of a child's tree: its worker and everything below it.
pub fn tree_of(worker: u32) -> Vec<u32> {
    std::iter::once(worker)
        .chain(descendants(worker).into_iter().map(|p| p.pid))
        .collect()
}

/// The broker's lock holders (`subzero-hold`), one beside each worker.
fn holders_of(broker: u32) -> Vec<u32> {
    descendants(broker)
        .into_iter()
        .filter(|p| {
            p.argv.first().is_some_and(|a| {
                Path::new(a)
                    .file_name()
                    .is_some_and(|n| n == "subzero-hold")
            })
        })
        .map(|p| p.pid)
        .collect()
}

/// Memory of each process of a tree and their sum.
pub fn tree_memory(pids: &[u32]) -> (Vec<(u32, Memory)>, Memory) {
    let mut sum = Memory::default();
    let each: Vec<(u32, Memory)> = pids
        .iter()
        .filter_map(|&pid| Memory::of(pid).map(|m| (pid, m)))
        .collect();
    for (_, m) in &each {
        sum.add(*m);
    }
    (each, sum)
}

/// A child tree waiting on its model, `runs` times.
#[derive(Default)]
pub struct ChildTree {
    pub processes: Samples,
    pub rss: Samples,
    pub pss: Samples,
    pub hwm: Samples,
    /// The broker's RSS with that one child.
    pub broker_rss: Samples,
    /// The processes of the last tree, with their command lines, for the notes.
    pub shape: String,
}

/// Spawns `template` `runs` times in one broker (one child at a time), each time waiting
/// until its first model request reached the (hanging) scripted model, then measures the
/// child's tree and stops it.
pub async fn child_tree(
    exe: &Path,
    config: &str,
    template: &str,
    runs: usize,
) -> Result<ChildTree, Fail> {
    let env = BenchEnv::new(exe, Vec::new())?;
    env.append_config(config)?;
    let s = env.broker().await?;
    let broker = s.pid().ok_or("no broker pid")?;
    let mut out = ChildTree::default();
    for _ in 0..runs {
        env.server.push(Reply::Hang);
        let before = env.server.requests().len();
        let (child, run) = env.spawn(&s, template, "Look around.").await?;
        let deadline = Instant::now() + LONG;
        while env.server.requests().len() <= before {
            if Instant::now() >= deadline {
                return Err(format!("the {template} child never reached its model").into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Let the request settle into its wait (the worker parked on the response).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let workers = workers_of(broker);
        let [worker] = workers.as_slice() else {
            return Err(format!("expected one worker under the broker, found {workers:?}").into());
        };
        // What the child costs: its worker's tree and the lock holder beside it.
        let mut pids = tree_of(*worker);
        pids.extend(holders_of(broker));
        let (each, sum) = tree_memory(&pids);
        out.processes.push(each.len() as f64);
        out.rss.push(sum.rss);
        out.pss.push(sum.pss);
        out.hwm.push(sum.hwm);
        if let Some(rss) = rss_mib(broker) {
            out.broker_rss.push(rss);
        }
        out.shape = shape_of(&each);
        ok(
            &s,
            "subzero_stop",
            json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
        )
        .await?;
    }
    s.close().await?;
    Ok(out)
}

/// Each process of a tree with its memory, for the notes: `` `subzero-worker worker` (RSS
/// …, PSS …, VmHWM … MiB) + … ``.
fn shape_of(each: &[(u32, Memory)]) -> String {
    each.iter()
        .map(|(pid, m)| {
            format!(
                "{} (RSS {:.1}, PSS {:.1}, VmHWM {:.1} MiB)",
                command_of(*pid),
                m.rss,
                m.pss,
                m.hwm
            )
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// `subzero-worker worker`, `node …/main.js`: the first two words of a command line.
fn command_of(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .take(2)
        .map(|w| {
            let word = String::from_utf8_lossy(w);
            Path::new(word.as_ref())
                .file_name()
                .map_or_else(|| word.to_string(), |n| n.to_string_lossy().into_owned())
        })
        .collect();
    format!("`{}`", words.join(" "))
}
