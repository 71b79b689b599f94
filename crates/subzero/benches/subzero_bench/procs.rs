//! The process table as `/proc` shows it: trees and liveness (shared with the tests, in
//! `subzero_testkit::procs`) plus memory counters.

use std::path::Path;

use std::time::{Duration, Instant};
pub use subzero_testkit::procs::*;

/// Descendants of `broker` running `sleep`.
pub fn sleeps_under(broker: u32) -> Vec<u32> {
    descendants(broker)
        .into_iter()
        .filter(|p| {
            p.argv
                .first()
                .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "sleep"))
        })
        .map(|p| p.pid)
        .collect()
}

/// Processes running in `workspace` whose program ends in `sleep`: what a tool tree left
/// behind.
pub fn sleeps_in(workspace: &Path) -> Vec<u32> {
    running_in(workspace)
        .into_iter()
        .filter(|p| p.argv.first().is_some_and(|a| a.ends_with("sleep")))
        .map(|p| p.pid)
        .collect()
}

/// A `/proc/PID/status` counter in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// VmRSS of `pid` in MiB.
pub fn rss_mib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmRSS").map(|k| k as f64 / 1024.0)
}

/// VmHWM (peak RSS) of `pid` in MiB.
pub fn hwm_mib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmHWM").map(|k| k as f64 / 1024.0)
}

/// Poll `check` every `every` until it holds or `limit` passes.
pub fn eventually(limit: Duration, every: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}
