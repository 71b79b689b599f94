//! The kernel monitor: a thread that samples the process table every few milliseconds for
//! the whole run and reports two workers of one child, or two writers of one write scope,
//! the moment it sees them. It reads the descriptors the workers hold (and the kernel's
//! `flock` on them), never the store's claims; the store is read only to learn which
//! children are write-capable and which of those write their own checkout.
//!
//! A write scope is the workspace for every shared coder, and one checkout for an isolated
//! coder: isolated coders of one workspace rightly run at once, and two workers of one
//! checkout are two workers of one child, which `one-worker-per-child` catches.

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
    /// Samples the workers of `state`, and the tool processes under `root` (the soak's
    /// directory: the workspace and the checkouts).
    pub fn start(
        state: PathBuf,
        root: PathBuf,
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
                    for (invariant, detail) in judge(&workers, &mut |c| store.writes(c)) {
                        if confirmed(&workers, &state, &detail) {
                            verdicts.add(invariant, step.load(Ordering::SeqCst), detail);
                        }
                    }
                    if round.is_multiple_of(4) {
                        for detail in outlived(&root, &mut store) {
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

/// Where a child's runs may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Nowhere (a researcher), or not known (yet).
    Nothing,
    /// The workspace: a shared coder, one of the workspace's one writer at a time.
    Workspace,
    /// Its own checkout: an isolated coder, a write scope of its own.
    Checkout,
}

/// What one sample of the workers breaks. `writes` says where a child writes (unknown
/// counts as nowhere). Workers holding a writer slot of the workspace, and shared coders'
/// workers with or without one, are the workspace's writers: never two at once.
pub fn judge(
    workers: &[WorkerProc],
    writes: &mut dyn FnMut(&str) -> Writes,
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
        .filter(|w| {
            w.child.as_deref().map(&mut *writes) == Some(Writes::Workspace)
                || !w.writer_slots.is_empty()
        })
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
fn outlived(root: &Path, store: &mut Store) -> Vec<String> {
    let tagged = kernel::tagged(root);
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
    kernel::tagged(root)
        .into_iter()
        .filter_map(|(pid, tag)| {
            let (run, status) = ended.get(&tag)?;
            Some(format!(
                "run {run} ({tag}) is recorded {status}, yet its tool process {pid} still runs"
            ))
        })
        .collect()
}

/// What the monitor reads of the store (read-only): where each child writes, and whether
/// a tagged run has ended.
struct Store {
    db: PathBuf,
    known: HashMap<String, Writes>,
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

    /// Where `child` writes, from its template and whether the ledger holds a checkout of
    /// it. Both are written before its first worker starts and never change, so what a
    /// live worker's child reads once is kept.
    fn writes(&mut self, child: &str) -> Writes {
        if let Some(known) = self.known.get(child) {
            return *known;
        }
        let found: Option<Writes> = self.conn().and_then(|c| {
            c.query_row(
                "SELECT write_capable, \
                 EXISTS (SELECT 1 FROM checkouts k WHERE k.child_id = c.child_id) AS isolated \
                 FROM children c WHERE c.child_id = ?1",
                [child],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
            )
            .ok()
            .map(|(writer, isolated)| match (writer != 0, isolated != 0) {
                (false, _) => Writes::Nothing,
                (true, false) => Writes::Workspace,
                (true, true) => Writes::Checkout,
            })
        });
        if let Some(found) = found {
            self.known.insert(child.to_owned(), found);
        }
        found.unwrap_or(Writes::Nothing)
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
        let found = judge(&ws, &mut |_| Writes::Nothing);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, Invariant::OneWorkerPerChild);
        assert!(found[0].1.contains("pid 1 ") && found[0].1.contains("pid 2 "));
    }

    /// `ch_s…` children are shared coders, `ch_i…` isolated ones, the rest researchers.
    fn writes(child: &str) -> Writes {
        if child.starts_with("ch_s") {
            Writes::Workspace
        } else if child.starts_with("ch_i") {
            Writes::Checkout
        } else {
            Writes::Nothing
        }
    }

    #[test]
    fn two_shared_coders_running_at_once_are_a_finding_even_without_a_slot() {
        let ws = [worker(1, "ch_sa", false), worker(2, "ch_sb", false)];
        let found = judge(&ws, &mut writes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, Invariant::OneWriterPerScope);
        let shared = [worker(1, "ch_a", true), worker(2, "ch_b", true)];
        let found = judge(&shared, &mut writes);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.0 == Invariant::OneWriterPerScope));
    }

    #[test]
    fn one_coder_beside_researchers_is_fine() {
        let ws = [
            worker(1, "ch_sa", true),
            worker(2, "ch_b", false),
            worker(3, "ch_c", false),
        ];
        assert!(judge(&ws, &mut writes).is_empty());
    }

    #[test]
    fn isolated_coders_run_beside_each_other_and_beside_one_shared_coder() {
        let ws = [
            worker(1, "ch_ia", false),
            worker(2, "ch_ib", false),
            worker(3, "ch_ic", false),
            worker(4, "ch_sd", true),
        ];
        assert!(judge(&ws, &mut writes).is_empty());
        let two_shared = [
            worker(1, "ch_ia", false),
            worker(2, "ch_sb", true),
            worker(3, "ch_sc", false),
        ];
        let found = judge(&two_shared, &mut writes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("pid 2 ") && found[0].1.contains("pid 3 "));
        assert!(!found[0].1.contains("pid 1 "), "{found:?}");
    }

    #[test]
    fn an_isolated_coder_holding_the_workspace_slot_counts_as_its_writer() {
        let ws = [worker(1, "ch_ia", true), worker(2, "ch_sb", false)];
        let found = judge(&ws, &mut writes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, Invariant::OneWriterPerScope);
    }
}
