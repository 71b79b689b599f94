//! The kernel monitor: a thread that samples the process table every few milliseconds for
//! the whole run and reports two workers of one child, or two writers of one write scope,
//! the moment it sees them. It reads the descriptors the workers hold (and the kernel's
//! `flock` on them), never the store's claims; the store is read only to learn which
//! children are write-capable.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::kernel::{self, WorkerProc};
use crate::verdict::{Invariant, Verdicts};

const PERIOD: Duration = Duration::from_millis(15);

/// The running monitor; [`Monitor::stop`] ends it and returns the samples taken.
#[derive(Debug)]
pub struct Monitor {
    stop: Arc<AtomicBool>,
    samples: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    pub fn start(
        state: PathBuf,
        workspace: PathBuf,
        verdicts: Arc<Verdicts>,
        step: Arc<AtomicUsize>,
    ) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), samples.clone());
        let thread = std::thread::Builder::new()
            .name("soak-monitor".into())
            .spawn(move || {
                let mut store = Store::new(&state);
                let mut round = 0u64;
                while !s.load(Ordering::SeqCst) {
                    let workers = kernel::workers(&state);
                    for (invariant, detail) in judge(&workers, &mut |c| store.is_coder(c)) {
                        if confirmed(&workers, &state, &detail) {
                            verdicts.add(invariant, step.load(Ordering::SeqCst), detail);
                        }
                    }
                    if round.is_multiple_of(4) {
                        for detail in outlived(&workspace, &mut store) {
                            verdicts.add(
                                Invariant::NoLeftoverProcess,
                                step.load(Ordering::SeqCst),
                                detail,
                            );
                        }
                    }
                    round += 1;
                    n.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(PERIOD);
                }
            })
            .ok();
        Monitor {
            stop,
            samples,
            thread,
        }
    }

    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.samples.load(Ordering::Relaxed)
    }
}

/// What one sample of the workers breaks. `is_coder` says whether a child is
/// write-capable (unknown counts as not).
pub fn judge(
    workers: &[WorkerProc],
    is_coder: &mut dyn FnMut(&str) -> bool,
) -> Vec<(Invariant, String)> {
    let mut found = Vec::new();
    let mut by_child: BTreeMap<&str, Vec<&WorkerProc>> = BTreeMap::new();
    for w in workers {
        if let Some(child) = &w.child {
            by_child.entry(child).or_default().push(w);
        }
    }
    for (child, ws) in &by_child {
        if ws.len() > 1 {
            found.push((
                Invariant::OneWorkerPerChild,
                format!(
                    "child {child} has {} live workers at once: {}",
                    ws.len(),
                    describe(ws)
                ),
            ));
        }
    }
    let writers: Vec<&WorkerProc> = workers
        .iter()
        .filter(|w| w.child.as_deref().is_some_and(&mut *is_coder) || !w.writer_slots.is_empty())
        .collect();
    let mut by_slot: BTreeMap<&Path, Vec<&WorkerProc>> = BTreeMap::new();
    for w in &writers {
        for slot in &w.writer_slots {
            by_slot.entry(slot).or_default().push(w);
        }
    }
    for (slot, ws) in by_slot {
        if ws.len() > 1 {
            found.push((
                Invariant::OneWriterPerScope,
                format!(
                    "writer slot {} is held by {} workers at once: {}",
                    slot.display(),
                    ws.len(),
                    describe(&ws)
                ),
            ));
        }
    }
    if writers.len() > 1 {
        found.push((
            Invariant::OneWriterPerScope,
            format!(
                "{} write-capable runs of one workspace at once: {}",
                writers.len(),
                describe(&writers)
            ),
        ));
    }
    found
}

fn describe(ws: &[&WorkerProc]) -> String {
    ws.iter()
        .map(|w| {
            format!(
                "pid {} (child {}, child lock {}, writer slots {})",
                w.pid,
                w.child.as_deref().unwrap_or("?"),
                if w.child_lock_held {
                    "flock held"
                } else {
                    "no flock"
                },
                w.writer_slots.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A second look at the pids a finding names: each must still be alive and hold what it
/// held, so a worker that exited between two reads of one sample is not a finding.
fn confirmed(workers: &[WorkerProc], state: &Path, detail: &str) -> bool {
    workers
        .iter()
        .filter(|w| detail.contains(&format!("pid {} ", w.pid)))
        .all(|w| {
            kernel::processes()
                .iter()
                .find(|p| p.pid == w.pid)
                .map(|p| kernel::worker_of(p, state))
                .is_some_and(|now| now.child == w.child && now.writer_slots == w.writer_slots)
        })
}

/// Tool processes alive after the store recorded their run's end: the worker kills a run's
/// tree before it reports the end, and the broker records it only then. The store is read
/// *before* the second look at the processes, so a process seen after its run's end was
/// recorded outlived it (never a process that died in between).
fn outlived(workspace: &Path, store: &mut Store) -> Vec<String> {
    let tagged = kernel::tagged(workspace);
    if tagged.is_empty() {
        return Vec::new();
    }
    let mut ended: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (_, tag) in &tagged {
        if !ended.contains_key(tag)
            && let Some((run, status)) = store.ended_run(tag)
        {
            ended.insert(tag.clone(), (run, status));
        }
    }
    if ended.is_empty() {
        return Vec::new();
    }
    kernel::tagged(workspace)
        .into_iter()
        .filter_map(|(pid, tag)| {
            let (run, status) = ended.get(&tag)?;
            Some(format!(
                "run {run} ({tag}) is recorded {status}, yet its tool process {pid} still runs"
            ))
        })
        .collect()
}

/// What the monitor reads of the store (read-only): which children are write-capable,
/// and whether a tagged run has ended.
struct Store {
    db: PathBuf,
    known: HashMap<String, bool>,
    conn: Option<rusqlite::Connection>,
}

impl Store {
    fn new(state: &Path) -> Store {
        Store {
            db: state.join("subzero.db"),
            known: HashMap::new(),
            conn: None,
        }
    }

    fn conn(&mut self) -> Option<&rusqlite::Connection> {
        if self.conn.is_none() {
            self.conn = rusqlite::Connection::open_with_flags(
                &self.db,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok();
        }
        self.conn.as_ref()
    }

    /// The run whose prompt carries `tag`, with its status, when that status is terminal.
    fn ended_run(&mut self, tag: &str) -> Option<(String, String)> {
        const ENDED: [&str; 5] = [
            "completed",
            "budget_exhausted",
            "failed",
            "stopped",
            "interrupted",
        ];
        let pattern = format!("%[soak tag={tag} %");
        let (run, status): (String, String) = self
            .conn()?
            .query_row(
                "SELECT run_id, status FROM runs WHERE prompt LIKE ?1",
                [pattern],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .ok()?;
        ENDED.contains(&status.as_str()).then_some((run, status))
    }

    fn is_coder(&mut self, child: &str) -> bool {
        if let Some(known) = self.known.get(child) {
            return *known;
        }
        let found: Option<bool> = self.conn().and_then(|c| {
            c.query_row(
                "SELECT write_capable FROM children WHERE child_id = ?1",
                [child],
                |row| row.get::<_, i64>(0),
            )
            .ok()
            .map(|w| w != 0)
        });
        if let Some(found) = found {
            self.known.insert(child.to_owned(), found);
        }
        found.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(pid: u32, child: &str, writer: bool) -> WorkerProc {
        WorkerProc {
            pid,
            child: Some(child.to_owned()),
            child_lock_held: true,
            writer_slots: if writer {
                vec![PathBuf::from("/s/locks/slots/k.writer.0.lock")]
            } else {
                vec![]
            },
            stopped: false,
        }
    }

    #[test]
    fn two_workers_of_one_child_are_a_finding() {
        let ws = [
            worker(1, "ch_a", false),
            worker(2, "ch_a", false),
            worker(3, "ch_b", false),
        ];
        let found = judge(&ws, &mut |_| false);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, Invariant::OneWorkerPerChild);
        assert!(found[0].1.contains("pid 1 ") && found[0].1.contains("pid 2 "));
    }

    #[test]
    fn two_coders_running_at_once_are_a_finding_even_without_a_slot() {
        let ws = [worker(1, "ch_a", false), worker(2, "ch_b", false)];
        let found = judge(&ws, &mut |c| c == "ch_a" || c == "ch_b");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, Invariant::OneWriterPerScope);
        let shared = [worker(1, "ch_a", true), worker(2, "ch_b", true)];
        let found = judge(&shared, &mut |_| false);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.0 == Invariant::OneWriterPerScope));
    }

    #[test]
    fn one_coder_beside_researchers_is_fine() {
        let ws = [
            worker(1, "ch_a", true),
            worker(2, "ch_b", false),
            worker(3, "ch_c", false),
        ];
        assert!(judge(&ws, &mut |c| c == "ch_a").is_empty());
    }
}
