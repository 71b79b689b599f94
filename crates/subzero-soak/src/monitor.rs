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
    pub fn start(state: PathBuf, verdicts: Arc<Verdicts>, step: Arc<AtomicUsize>) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), samples.clone());
        let thread = std::thread::Builder::new()
            .name("soak-monitor".into())
            .spawn(move || {
                let mut coders = Coders::new(&state);
                while !s.load(Ordering::SeqCst) {
                    let workers = kernel::workers(&state);
                    for (invariant, detail) in judge(&workers, &mut |c| coders.is_coder(c)) {
                        if confirmed(&workers, &state, &detail) {
                            verdicts.add(invariant, step.load(Ordering::SeqCst), detail);
                        }
                    }
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

/// Which children are write-capable, read from the store (read-only) and cached.
struct Coders {
    db: PathBuf,
    known: HashMap<String, bool>,
    conn: Option<rusqlite::Connection>,
}

impl Coders {
    fn new(state: &Path) -> Coders {
        Coders {
            db: state.join("subzero.db"),
            known: HashMap::new(),
            conn: None,
        }
    }

    fn is_coder(&mut self, child: &str) -> bool {
        if let Some(known) = self.known.get(child) {
            return *known;
        }
        if self.conn.is_none() {
            self.conn = rusqlite::Connection::open_with_flags(
                &self.db,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok();
        }
        let found: Option<bool> = self.conn.as_ref().and_then(|c| {
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
