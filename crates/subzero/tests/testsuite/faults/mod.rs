//! Breaking things on purpose: killed brokers and workers, a busy or broken database, full disks,
//! foreign locks, malformed frames, shutdown signals.

mod artifact;
mod broker_kill;
mod db_busy;
mod db_file;
mod foreign_lock;
mod full_disk;
mod jsonrpc_frames;
mod lock_inheritance;
mod model;
mod pipelined_burst;
mod sequential_writers;
mod shutdown;
mod stop;
mod storage;
mod surviving_broker;
mod worker_kill;
