//! The process table as `/proc` shows it: trees, liveness and memory counters.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One live (non-zombie) process.
#[derive(Clone, Debug)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
}

/// Every live process; zombies hold nothing and count as gone.
pub fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read_proc)
        .collect()
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let ppid = fields.next()?.parse().ok()?;
    let argv = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()?
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
    Some(Proc {
        pid,
        ppid,
        argv,
        cwd,
    })
}

/// Whether `pid` is a live, non-zombie process.
pub fn alive(pid: u32) -> bool {
    read_proc(pid).is_some()
}

/// Every live descendant of `root`, found by parent links.
pub fn descendants(root: u32) -> Vec<Proc> {
    let table = processes();
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in table.iter().filter(|p| p.ppid == parent) {
            if !found.iter().any(|f| f.pid == p.pid) {
                frontier.push(p.pid);
                found.push(p.clone());
            }
        }
    }
    found
}

/// `subzero worker` processes among the descendants of `broker`.
pub fn workers_of(broker: u32) -> Vec<u32> {
    descendants(broker)
        .into_iter()
        .filter(|p| p.argv.get(1).is_some_and(|a| a == "worker"))
        .map(|p| p.pid)
        .collect()
}

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

/// Live processes whose working directory is inside `dir` (other than this one).
pub fn running_in(dir: &Path) -> Vec<Proc> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|p| p.pid != me && p.cwd.as_ref().is_some_and(|c| c.starts_with(&dir)))
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

/// SIGKILL one process.
pub fn sigkill(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
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
