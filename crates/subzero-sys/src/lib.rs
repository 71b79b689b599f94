//! The Linux mechanisms the broker (`subzero-runtime`) and the worker (`subzero-worker`)
//! share, in one home, on rustix (libc only where rustix has no safe call, each place
//! saying so):
//!
//! - [`caps`]: the capability a worker keeps in its user namespace, dropped by its tools;
//! - [`cgroup`]: one cgroup (make, limit, join, kill, empty, remove) and where a process's
//!   own cgroup is ([`cgroup::find`]);
//! - [`rlimit`]: resource limits capped at the inherited hard limit, set before exec;
//! - [`child`] and [`namespace`]: a child cloned onto its own stack, its report pipe, and
//!   what it does in fresh namespaces (1:1 id maps, private mounts);
//! - [`signal`] and [`reap`]: signals to processes and groups, the termination mask, exit
//!   statuses and the child-subreaper attribute;
//! - [`procfs`]: the process table; [`digits`]: decimal digits written without allocating
//!   between fork and exec.

pub mod caps;
pub mod cgroup;
pub mod child;
pub mod digits;
pub mod namespace;
pub mod procfs;
pub mod reap;
pub mod rlimit;
pub mod signal;
