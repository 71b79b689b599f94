//! Supervising worker processes: starting them, talking to them, ending them.
//!
//! `spawn` (through `launch`, its one `clone`) is the only module that creates a worker; `reap` (signals) and `cgroup`
//! (`cgroup.kill`) are the only ones that end processes; `conn` speaks the JSON-lines
//! control protocol of `schema-src/v1/control-*`.

pub mod cgroup;
pub mod conn;
mod holder;
mod launch;
pub mod limits;
mod process;
pub mod proof;
pub mod reap;
pub mod spawn;

pub use conn::{Hello, WorkerConn};
pub use process::strays;
pub use spawn::{
    FilesystemMode, PID_NAMESPACE_HINT, ProcessMode, ProcessPlan, SpawnedWorker, Spawner,
    WORKER_BINARY, WORKER_LOCK_FD, WorkerLaunch, WorkerSetup, worker_executable, worker_missing,
};
