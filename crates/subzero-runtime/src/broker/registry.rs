//! The worker registry: how workers start (the spawner, the worker binary, the engines),
//! the children this broker holds in memory (model, key, grant, live worker), and the
//! drivers still running.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use subzero_core::ChildId;
use tokio::sync::Notify;

use super::engines::Engines;
use super::live::Live;
use super::lock;
use crate::supervisor::{Spawner, WorkerLaunch};

/// This broker's workers and what it holds for each child it serves.
#[derive(Debug)]
pub(super) struct Workers {
    pub(super) spawner: Spawner,
    exe: PathBuf,
    /// Log filter passed to workers as `SUBZERO_LOG`.
    log: Option<String>,
    /// The workers a child can run on (`WorkerKind → Engine`).
    pub(super) engines: Engines,
    /// Worker slots per workspace (`[limits] active_workers_per_workspace`).
    pub(super) worker_slots: u32,
    /// Write-capable runs per workspace (`[limits] write_runs_per_workspace`).
    pub(super) writer_slots: u32,
    live: Mutex<HashMap<ChildId, Live>>,
    /// Worker drivers still running.
    drivers: AtomicUsize,
    /// Woken whenever a worker driver finishes.
    gone: Notify,
}

/// How the registry is set up.
pub(super) struct WorkersSetup {
    pub spawner: Spawner,
    pub exe: PathBuf,
    pub log: Option<String>,
    pub engines: Engines,
    pub worker_slots: u32,
    pub writer_slots: u32,
}

impl Workers {
    pub(super) fn new(setup: WorkersSetup) -> Workers {
        Workers {
            spawner: setup.spawner,
            exe: setup.exe,
            log: setup.log,
            engines: setup.engines,
            worker_slots: setup.worker_slots,
            writer_slots: setup.writer_slots,
            live: Mutex::new(HashMap::new()),
            drivers: AtomicUsize::new(0),
            gone: Notify::new(),
        }
    }

    /// How to start a worker in `cwd` with `inherit` at descriptors 3, 4, …
    pub(super) fn launch(
        &self,
        inherit: Vec<std::os::fd::OwnedFd>,
        cwd: &Path,
        engine: Vec<std::ffi::OsString>,
    ) -> WorkerLaunch {
        WorkerLaunch {
            exe: self.exe.clone(),
            inherit,
            cwd: cwd.to_path_buf(),
            log_filter: self.log.clone(),
            engine,
        }
    }

    /// The children held in memory (model, key, grant, live worker), locked.
    pub(super) fn live(&self) -> MutexGuard<'_, HashMap<ChildId, Live>> {
        lock(&self.live)
    }

    /// A worker driver starts.
    pub(super) fn driver_started(&self) {
        self.drivers.fetch_add(1, Ordering::SeqCst);
    }

    /// A worker driver finished: wakes those waiting for drivers to end.
    pub(super) fn driver_finished(&self) {
        self.drivers.fetch_sub(1, Ordering::SeqCst);
        self.gone.notify_waiters();
    }

    /// Worker drivers still running.
    pub(super) fn drivers_running(&self) -> usize {
        self.drivers.load(Ordering::SeqCst)
    }

    /// Notified when a driver finishes (register before checking the count).
    pub(super) fn driver_gone(&self) -> tokio::sync::futures::Notified<'_> {
        self.gone.notified()
    }
}
