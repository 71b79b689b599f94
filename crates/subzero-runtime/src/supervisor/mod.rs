//! Supervising worker processes: starting them, talking to them, ending them.
//!
//! `spawn` is the only module that creates a worker; `reap` (signals) and `cgroup`
//! (`cgroup.kill`) are the only ones that end processes; `conn` speaks the JSON-lines
//! control protocol of `schema-src/v1/control-*`.

pub mod cgroup;
pub mod conn;
pub mod limits;
pub mod proof;
pub mod reap;
pub mod spawn;

pub use conn::{Hello, WorkerConn};
pub use spawn::{
    FilesystemMode, ProcessMode, ProcessPlan, SpawnedWorker, Spawner, WORKER_LOCK_FD, WorkerLaunch,
    WorkerSetup,
};
