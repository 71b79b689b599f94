//! The process table as tests and benchmarks see it: which processes live, who their
//! parents are, where they run. Workers and tool processes of one test are recognised by
//! their working directory (the test's temporary workspace), so checks never touch
//! anything outside the test, even after a broker died and its orphans were re-parented.

use std::path::{Path, PathBuf};

/// One live (non-zombie) process as `/proc` shows it.
#[derive(Clone, Debug)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `T` stopped, …).
    pub state: char,
}

/// Every live process; zombies are left out (a zombie runs nothing and holds nothing).
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

/// One process as `/proc` shows it, or `None` when it is gone or a zombie.
pub fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    if state == 'Z' || state == 'X' {
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
        state,
    })
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: u32) -> bool {
    read_proc(pid).is_some()
}

/// Every live descendant of `root` (children, grandchildren, …), found by parent links.
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

/// The `subzero-worker worker` processes among the descendants of `broker`.
pub fn workers_of(broker: u32) -> Vec<u32> {
    descendants(broker)
        .into_iter()
        .filter(|p| p.argv.get(1).is_some_and(|a| a == "worker"))
        .map(|p| p.pid)
        .collect()
}

/// Live processes whose working directory is inside `dir` (a test's temp dir): the
/// workers and tool processes of that test, wherever they were re-parented to.
pub fn running_in(dir: &Path) -> Vec<Proc> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|p| p.pid != me && p.cwd.as_ref().is_some_and(|c| c.starts_with(&dir)))
        .collect()
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
