//! The Linux mechanisms the broker (`subzero-runtime`) and the worker (`subzero-worker`)
//! share, in one home: the capability sets a worker keeps and its tools drop ([`caps`]),
//! decimal digits written without allocating between fork and exec ([`digits`]), and the
//! pids of the process table ([`procfs`]).

pub mod caps;
pub mod digits;
pub mod procfs;
