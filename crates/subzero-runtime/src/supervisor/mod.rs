//! Supervising worker processes: starting them, talking to them, ending them.
//!
//! `spawn` is the only module that creates a worker and `reap` the only one that sends
//! signals; `conn` speaks the JSON-lines control protocol of `schema-src/v1/control-*`.

pub mod conn;
pub mod proof;
pub mod reap;
pub mod spawn;

pub use conn::{Hello, WorkerConn};
pub use spawn::{
    FilesystemMode, ProcessMode, SpawnedWorker, Spawner, WORKER_LOCK_FD, WorkerLaunch,
};
