//! Containment of tool processes. This is the only module that signals or reaps processes
//! (one timed-out call's tree: [`call_tree`]; the whole tool tree: [`Containment`]).
//!
//! The worker is a child subreaper, so every descendant — also `setsid` and double-forked
//! daemons — stays in its process subtree and is found by walking `/proc`. Each tool process
//! leads its own process group. The worker reaps every child itself (`waitpid(-1)`), so
//! tools read their exit status from here rather than from `std::process::Child`. Where
//! the worker runs in a cgroup ([`cgroup`]), every tool process is in its `tools` child
//! and a teardown ends with `cgroup.kill` there.

pub mod call_tree;
pub mod cgroup;
pub mod fds;
pub mod landlock;
pub mod limits;
pub mod network;
mod receipts;
pub mod tool;
pub mod view;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::DumpableBehavior;
use subzero_protocol::ProcessContainmentMode;
use subzero_sys::procfs::{Stat, pids};
use subzero_sys::reap::{Reaped, reap};
use subzero_sys::signal::{Signal, send_group, send_u32};

pub use receipts::{Refused, support, wire};

/// How long tool processes get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(150);
/// Upper bound for the SIGKILL sweep (a process stuck in uninterruptible sleep).
const SWEEP_LIMIT: Duration = Duration::from_secs(5);
/// How often a teardown looks whether the tree is gone (one `waitpid`).
const POLL: Duration = Duration::from_millis(1);
/// How often the SIGKILL sweep walks `/proc` again.
const SWEEP_POLL: Duration = Duration::from_millis(5);

/// Makes the worker non-dumpable and a child subreaper (where the kernel lets it: see
/// [`ProcessReport::observe`]), and asks for SIGTERM when its parent dies.
///
/// Non-dumpable first: the worker holds the model key and MCP secrets in memory, and a
/// dumpable process's `/proc/<pid>/mem`, `environ` and `fd` are open to every process of
/// the same user — its own tool processes included. Those are exec'd, which makes them
/// dumpable again; they never hold the key. The worker still reads its own `/proc/self`
/// and every process's `stat`, which stay readable.
///
/// The broker's clone child set a SIGTERM parent-death signal before `execve` (kept across
/// it): when the broker dies the worker tears its tree down (holding its copies of the
/// locks) and exits, and as init of its namespace the kernel then ends whatever is left.
/// A worker outside a namespace sets it again, for one started by hand.
pub fn init_process() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable)?;
    if is_namespace_init() {
        // Init of its namespace adopts every orphan in it already: being a subreaper as well
        // adds nothing, and an emulator (qemu-user) does not know the call.
        if let Err(err) = subzero_sys::reap::become_subreaper() {
            tracing::debug!(%err, "not a subreaper (init of the namespace adopts orphans)");
        }
        return Ok(());
    }
    if let Err(err) = subzero_sys::reap::become_subreaper() {
        // Only an emulator (qemu-user) or a filtering seccomp profile refuses it: the worker
        // runs on process groups alone and its hello says so (`process-group`).
        tracing::warn!(%err, "not a child subreaper: tool process groups only");
    }
    rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
    Ok(())
}

/// The argument with which the broker tells a worker why it is not init of a PID namespace.
pub const REASON_ARG: &str = "--process-containment-reason";

/// Unblocks the termination signals the worker started with blocked (the broker's clone
/// child blocks them before exec, so a parent-death signal sent before its handlers exist
/// is pending, not lost: `subzero_sys::signal::TERMINATION`); call once the handlers are
/// installed.
pub fn unblock_termination() {
    if let Err(err) = subzero_sys::signal::unblock_termination() {
        tracing::warn!(%err, "cannot unblock the termination signals");
    }
}

/// Whether this process is init (PID 1) of its PID namespace.
pub fn is_namespace_init() -> bool {
    std::process::id() == 1
}

/// The process-tree containment in force for this worker, as its hello reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessReport {
    /// `pid-namespace`, `cgroup`, `subreaper` or `process-group`.
    pub mode: ProcessContainmentMode,
    /// Why `pid-namespace` is not in force, and how to get it.
    pub reason: Option<String>,
}

impl ProcessReport {
    /// What this process is: init of a PID namespace, in a cgroup of its own
    /// ([`cgroup::enter_tools`] done), or a subreaper; the last two for `reason` (from the
    /// broker; a worker started by hand has none).
    pub fn observe(reason: Option<String>) -> Self {
        if is_namespace_init() {
            return Self {
                mode: ProcessContainmentMode::PidNamespace,
                reason: None,
            };
        }
        if cgroup::tools().is_some() {
            return Self {
                mode: ProcessContainmentMode::Cgroup,
                reason: Some(reason.unwrap_or_else(|| {
                    "the worker was started in a cgroup without a reason for it".to_owned()
                })),
            };
        }
        if !subzero_sys::reap::is_subreaper() {
            return Self {
                mode: ProcessContainmentMode::ProcessGroup,
                reason: Some(format!(
                    "PR_SET_CHILD_SUBREAPER is refused here (an emulator such as qemu-user, or a \
                     seccomp profile), so tool processes that leave their process group are not \
                     contained; {}",
                    reason.unwrap_or_else(|| "the worker was started by hand".to_owned())
                )),
            };
        }
        Self {
            mode: ProcessContainmentMode::Subreaper,
            reason: Some(reason.unwrap_or_else(|| {
                "the worker was started by hand, not by a broker, so it is not init of a PID namespace".to_owned()
            })),
        }
    }
}

/// Tracks tool process groups and exit statuses of reaped children.
#[derive(Debug, Default)]
pub struct Containment {
    groups: Mutex<HashSet<i32>>,
    exits: Mutex<HashMap<i32, i32>>,
}

impl Containment {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a tool process that leads its own process group.
    pub fn register_group(&self, pid: u32) {
        if let Ok(pid) = i32::try_from(pid) {
            self.groups
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(pid);
        }
    }

    /// Reaps every exited child without blocking and remembers the statuses.
    pub fn reap(&self) {
        while let Reaped::Exited { pid, code } = reap(None) {
            self.record(pid, code);
        }
    }

    fn record(&self, pid: i32, code: i32) {
        self.exits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(pid, code);
    }

    /// The exit code of a reaped child (128 + signal when killed), consuming the record.
    pub fn take_exit(&self, pid: u32) -> Option<i32> {
        let pid = i32::try_from(pid).ok()?;
        self.exits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&pid)
    }

    /// Kills one tool's process group at once (SIGKILL). Used when a tool overruns.
    pub fn kill_group(&self, pid: u32) {
        if let Ok(pid) = i32::try_from(pid) {
            send_group(pid, Signal::KILL);
        }
    }

    /// Tears the whole tool tree down: SIGTERM the groups and every descendant, a short grace,
    /// SIGKILL whatever remains (found again via `/proc` each round, and all of the tool
    /// cgroup at once through `cgroup.kill` when there is one), and reap until no
    /// descendant is left. Returns how many distinct live processes were found.
    ///
    /// The grace ends the moment the worker has no child left — alive or zombie — which
    /// (the worker being a subreaper) means no descendant is left; that is a `waitpid`
    /// away, so it is checked every millisecond rather than by walking `/proc`. A tree
    /// that dies on SIGTERM is gone in a few milliseconds; only a process that outlives
    /// SIGTERM costs the whole grace, and SIGKILL follows it.
    pub async fn kill_all(&self) -> u32 {
        let groups: Vec<i32> = self
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        let me = std::process::id();
        let tools = cgroup::tools();
        let mut seen: HashSet<u32> = HashSet::new();

        if groups.is_empty() && self.tree_gone(tools) {
            // Nothing was started, or all of it is already gone and reaped.
            self.clear_exits();
            return 0;
        }
        for proc_ in descendants(me) {
            if !proc_.zombie {
                seen.insert(proc_.pid);
                send_u32(proc_.pid, Signal::TERM);
            }
        }
        for pid in tools.map(cgroup::Cgroup::members).unwrap_or_default() {
            seen.insert(pid);
            send_u32(pid, Signal::TERM);
        }
        for group in &groups {
            send_group(*group, Signal::TERM);
        }

        let grace_end = Instant::now() + GRACE;
        let mut gone = self.tree_gone(tools);
        while !gone && Instant::now() < grace_end {
            tokio::time::sleep(POLL).await;
            gone = self.tree_gone(tools);
        }

        let sweep_end = Instant::now() + SWEEP_LIMIT;
        while !gone {
            let remaining = descendants(me);
            let in_cgroup = tools.is_some_and(cgroup::Cgroup::populated);
            if remaining.is_empty() && !in_cgroup {
                break;
            }
            if Instant::now() > sweep_end {
                tracing::error!(
                    remaining = remaining.len(),
                    in_cgroup,
                    "tool processes survived SIGKILL"
                );
                break;
            }
            if let Some(tools) = tools.filter(|_| in_cgroup) {
                seen.extend(tools.members());
                if let Err(err) = tools.kill() {
                    tracing::warn!(%err, "cannot write cgroup.kill of the tool cgroup");
                }
            }
            for proc_ in &remaining {
                if !proc_.zombie {
                    seen.insert(proc_.pid);
                    send_u32(proc_.pid, Signal::KILL);
                }
            }
            for group in &groups {
                send_group(*group, Signal::KILL);
            }
            tokio::time::sleep(SWEEP_POLL).await;
            gone = self.tree_gone(tools);
        }
        self.clear_exits();
        u32::try_from(seen.len()).unwrap_or(u32::MAX)
    }

    /// Tears down every descendant of this process but `keep` — the Pi worker's Node, whose
    /// tools these are — SIGTERM first, SIGKILL after the grace, until none is left alive;
    /// reaps what was re-parented here (Node reaps its own children). Returns how many
    /// distinct live processes were found. The tool cgroup is not killed whole: `keep`
    /// lives in it.
    pub async fn kill_all_except(&self, keep: u32) -> u32 {
        let me = std::process::id();
        let alive = || -> Vec<u32> {
            descendants(me)
                .into_iter()
                .filter(|p| !p.zombie && p.pid != keep)
                .map(|p| p.pid)
                .collect()
        };
        let mut seen: HashSet<u32> = HashSet::new();
        let grace_end = Instant::now() + GRACE;
        let sweep_end = grace_end + SWEEP_LIMIT;
        let mut first = true;
        loop {
            self.reap();
            let left = alive();
            if left.is_empty() {
                break;
            }
            let now = Instant::now();
            if now > sweep_end {
                tracing::error!(remaining = left.len(), "tool processes survived SIGKILL");
                break;
            }
            let sig = if now >= grace_end {
                Signal::KILL
            } else {
                Signal::TERM
            };
            if first || sig == Signal::KILL {
                for pid in &left {
                    seen.insert(*pid);
                    send_u32(*pid, sig);
                }
            }
            first = false;
            tokio::time::sleep(SWEEP_POLL).await;
        }
        u32::try_from(seen.len()).unwrap_or(u32::MAX)
    }

    /// Reaps every exited child; true when the worker has no child left and the tool
    /// cgroup, when there is one, holds no process.
    fn tree_gone(&self, tools: Option<&cgroup::Cgroup>) -> bool {
        self.reap_until_childless() && !tools.is_some_and(cgroup::Cgroup::populated)
    }

    /// Reaps every exited child; true when the worker has no child left at all.
    fn reap_until_childless(&self) -> bool {
        loop {
            match reap(None) {
                Reaped::Exited { pid, code } => self.record(pid, code),
                Reaped::Running | Reaped::Failed => return false,
                Reaped::Interrupted => {}
                Reaped::NoChild => return true,
            }
        }
    }

    fn clear_exits(&self) {
        self.exits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[derive(Debug, Clone, Copy)]
struct ProcInfo {
    pid: u32,
    zombie: bool,
}

/// Every process below `root` in the process tree, found by walking `/proc`.
fn descendants(root: u32) -> Vec<ProcInfo> {
    let mut children: HashMap<u32, Vec<ProcInfo>> = HashMap::new();
    for (pid, _) in pids() {
        let Some(stat) = Stat::of(pid) else {
            continue;
        };
        if let Ok(ppid) = u32::try_from(stat.ppid) {
            children.entry(ppid).or_default().push(ProcInfo {
                pid,
                zombie: stat.state == 'Z',
            });
        }
    }
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(parent) = stack.pop() {
        if let Some(kids) = children.remove(&parent) {
            for kid in kids {
                stack.push(kid.pid);
                found.push(kid);
            }
        }
    }
    found
}
