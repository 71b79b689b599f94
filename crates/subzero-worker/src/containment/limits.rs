//! Resource bounds of a child's tool tree: processes, memory, file size and open files,
//! enforced by the kernel with what it offers, each named in the receipts with how.
//!
//! - **Processes** (tasks: processes and threads): a `pids` cgroup the broker made for this
//!   worker (`--limits-cgroup pids=DIR`, the cgroup v1 hierarchy where the broker may write
//!   it, normally as root) with `pids.max` — the whole tool tree, exactly; else
//!   `RLIMIT_NPROC` where it counts only this tree: inside the user namespace the broker made
//!   for the worker (counted per user namespace and uid since Linux 5.14), the limit set on
//!   each tool process before it makes its own user namespace, so the tree's namespace is
//!   bounded; else, in a user namespace per tool process only, each tool call's own tree.
//!   Root in the initial user namespace is exempt from `RLIMIT_NPROC`: there only the cgroup
//!   bounds it, and without one the receipt says nothing does.
//! - **Memory**: a `memory` cgroup made the same way, `memory.limit_in_bytes` — the whole
//!   tool tree (the kernel's OOM killer ends the largest tool in it, never the worker);
//!   else `RLIMIT_DATA` per process (its private writable memory: runtimes that reserve
//!   large address ranges without writing them, as V8 and the JVM do, are unaffected,
//!   unlike with `RLIMIT_AS`). An allocation past it fails with `ENOMEM`.
//! - **File size**: `RLIMIT_FSIZE` per process (a write past it fails with `EFBIG`; the
//!   signal it would raise is ignored for tools, see [`Bounds::apply`]).
//! - **Open files**: `RLIMIT_NOFILE` per process (`EMFILE`).
//!
//! Limits only ever go down: a value above the hard limit the worker inherited stays at
//! that hard limit. The mechanisms (cgroup files, `setrlimit`) are `subzero_sys`'s; which
//! bound goes where, and the receipts, are here.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use subzero_protocol::{ResourceBound, ResourceReceipt, ResourceScope};
use subzero_sys::cgroup::Cgroup;
use subzero_sys::rlimit::{Resource, capped, set};
use subzero_sys::signal::Signal;

use super::{Refused, wire};

/// The bounds of one child's tool tree, from its snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    pub processes: u64,
    pub memory_bytes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
}

impl ToolLimits {
    /// What a snapshot frozen before tool limits existed gets.
    pub const SHIPPED: ToolLimits = ToolLimits {
        processes: 4096,
        memory_bytes: 4 << 30,
        file_size_bytes: 4 << 30,
        open_files: 8192,
    };
}

/// The `pids` and `memory` cgroups the broker made for this worker, set once at start.
#[derive(Debug, Default)]
pub struct LimitCgroups {
    pids: Option<PathBuf>,
    memory: Option<PathBuf>,
}

static LIMIT_CGROUPS: OnceLock<LimitCgroups> = OnceLock::new();

/// Parses `--limits-cgroup CONTROLLER=DIR` values and remembers them; unknown
/// controllers are refused.
pub fn set_cgroups(values: &[String]) -> io::Result<()> {
    let mut cgroups = LimitCgroups::default();
    for value in values {
        let (controller, dir) = value.split_once('=').ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--limits-cgroup {value:?} is not CONTROLLER=DIR"),
            )
        })?;
        let dir = PathBuf::from(dir);
        match controller {
            "pids" => cgroups.pids = Some(dir),
            "memory" => cgroups.memory = Some(dir),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("--limits-cgroup names an unknown controller {other:?}"),
                ));
            }
        }
    }
    LIMIT_CGROUPS
        .set(cgroups)
        .map_err(|_| io::Error::other("the limit cgroups are already set"))
}

fn cgroups() -> &'static LimitCgroups {
    LIMIT_CGROUPS.get_or_init(LimitCgroups::default)
}

/// How one resource is bounded, for the receipts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The limit in force, or `None` when nothing bounds it.
    pub limit: Option<u64>,
    /// `tree`, `call`, `process` or `none`.
    pub scope: ResourceScope,
    /// The mechanism, or why there is none.
    pub mechanism: String,
}

/// How each resource of the tool tree is bounded on this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mechanisms {
    pub processes: Bound,
    pub memory: Bound,
    pub file_size: Bound,
    pub open_files: Bound,
}

impl Bound {
    fn receipt(&self) -> Result<ResourceBound, Refused> {
        Ok(ResourceBound {
            limit: self.limit.and_then(std::num::NonZeroU64::new),
            mechanism: wire(
                crate::control::short_text(&self.mechanism),
                "resources.mechanism",
            )?,
            scope: self.scope,
        })
    }
}

impl Mechanisms {
    /// `containment.resources`, as the contract types it.
    pub fn receipt(&self) -> Result<ResourceReceipt, Refused> {
        Ok(ResourceReceipt {
            processes: self.processes.receipt()?,
            memory: self.memory.receipt()?,
            file_size: self.file_size.receipt()?,
            open_files: self.open_files.receipt()?,
        })
    }
}

/// Where `RLIMIT_NPROC` is set, relative to the tool's own user namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NprocAt {
    /// Before the tool makes its user namespace: counts the worker's namespace (the tree).
    BeforeUserNamespace,
    /// After: counts only the tool's own namespace (its call's tree).
    AfterUserNamespace,
    /// Not at all (root is exempt, or it would count every process of the user).
    Nowhere,
}

/// What the worker knows at start about where it runs.
#[derive(Debug, Clone, Copy)]
pub struct Situation {
    /// Root in the initial user namespace (exempt from `RLIMIT_NPROC`).
    pub initial_root: bool,
    /// The worker runs in the user namespace the broker made for it.
    pub own_user_namespace: bool,
    /// Each tool process makes a user namespace of its own (`super::view`).
    pub tool_user_namespace: bool,
}

impl Situation {
    /// Observes this process (`view_user_namespace`: whether the tool view makes one).
    pub fn observe(view_user_namespace: bool) -> Situation {
        let euid = rustix::process::geteuid().as_raw();
        let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
        let lines: Vec<Vec<&str>> = uid_map
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let initial = lines.len() == 1 && lines[0] == ["0", "0", "4294967295"];
        let own = super::is_namespace_init()
            && lines.len() == 1
            && lines[0].len() == 3
            && lines[0][0] == euid.to_string()
            && lines[0][2] == "1";
        Situation {
            initial_root: initial && euid == 0,
            own_user_namespace: own,
            tool_user_namespace: view_user_namespace,
        }
    }

    fn nproc_at(self) -> NprocAt {
        if self.initial_root {
            NprocAt::Nowhere
        } else if self.own_user_namespace {
            NprocAt::BeforeUserNamespace
        } else if self.tool_user_namespace {
            NprocAt::AfterUserNamespace
        } else {
            NprocAt::Nowhere
        }
    }

    /// How each resource is bounded here, with `limits` (or without values, for `hello`).
    pub fn mechanisms(self, limits: Option<ToolLimits>) -> Mechanisms {
        let cgroups = cgroups();
        let value = |f: fn(&ToolLimits) -> u64| limits.as_ref().map(f);
        let processes = if cgroups.pids.is_some() {
            Bound {
                limit: value(|l| l.processes),
                scope: ResourceScope::Tree,
                mechanism: "cgroup v1 pids.max over every tool process".to_owned(),
            }
        } else {
            match self.nproc_at() {
                NprocAt::BeforeUserNamespace => Bound {
                    limit: value(|l| l.processes),
                    scope: ResourceScope::Tree,
                    mechanism:
                        "RLIMIT_NPROC in the worker's own user namespace (its threads count too)"
                            .to_owned(),
                },
                NprocAt::AfterUserNamespace => Bound {
                    limit: value(|l| l.processes),
                    scope: ResourceScope::Call,
                    mechanism: "RLIMIT_NPROC in each tool call's own user namespace".to_owned(),
                },
                NprocAt::Nowhere => Bound {
                    limit: None,
                    scope: ResourceScope::None,
                    mechanism: if self.initial_root {
                        "none: root in the initial user namespace ignores RLIMIT_NPROC and no pids cgroup could be made (mount the cgroup v1 pids controller, or run the broker unprivileged)".to_owned()
                    } else {
                        "none: without a user namespace of its own RLIMIT_NPROC would count every process of the user (enable user namespaces)".to_owned()
                    },
                },
            }
        };
        let memory = if cgroups.memory.is_some() {
            Bound {
                limit: value(|l| l.memory_bytes),
                scope: ResourceScope::Tree,
                mechanism: "cgroup v1 memory.limit_in_bytes over every tool process (the OOM killer ends the largest tool)".to_owned(),
            }
        } else {
            Bound {
                limit: value(|l| l.memory_bytes),
                scope: ResourceScope::Process,
                mechanism: "RLIMIT_DATA per tool process (allocations past it fail with ENOMEM)"
                    .to_owned(),
            }
        };
        Mechanisms {
            processes,
            memory,
            file_size: Bound {
                limit: value(|l| l.file_size_bytes),
                scope: ResourceScope::Process,
                mechanism: "RLIMIT_FSIZE per tool process (writes past it fail with EFBIG)"
                    .to_owned(),
            },
            open_files: Bound {
                limit: value(|l| l.open_files),
                scope: ResourceScope::Process,
                mechanism: "RLIMIT_NOFILE per tool process (EMFILE)".to_owned(),
            },
        }
    }
}

/// One run's bounds, prepared before any tool process is forked.
#[derive(Debug)]
pub struct Bounds {
    /// `(resource, value)` set on every tool process; values already capped at the hard
    /// limits the worker has.
    rlimits: Vec<(Resource, u64)>,
    nproc: Option<u64>,
    nproc_at: NprocAt,
    /// `cgroup.procs` of the limit cgroups, open for writing.
    joins: Vec<OwnedFd>,
}

impl Bounds {
    /// Writes the limits into the limit cgroups (each run: a resumed child's snapshot
    /// could differ only if the worker were reused across children, which it is not) and
    /// prepares the rlimits. A cgroup that refuses its limit is an error: the tree would
    /// be unbounded while the receipt said otherwise.
    pub fn prepare(limits: ToolLimits, situation: Situation) -> io::Result<Bounds> {
        let cgroups = cgroups();
        let mut joins = Vec::new();
        if let Some(dir) = &cgroups.pids {
            joins.push(limit_and_open(dir, "pids.max", limits.processes)?);
        }
        if let Some(dir) = &cgroups.memory {
            joins.push(limit_and_open(
                dir,
                "memory.limit_in_bytes",
                limits.memory_bytes,
            )?);
        }
        let mut rlimits = vec![
            (
                Resource::Fsize,
                capped(Resource::Fsize, limits.file_size_bytes),
            ),
            (
                Resource::Nofile,
                capped(Resource::Nofile, limits.open_files),
            ),
        ];
        if cgroups.memory.is_none() {
            rlimits.push((Resource::Data, capped(Resource::Data, limits.memory_bytes)));
        }
        let nproc_at = if cgroups.pids.is_some() {
            NprocAt::Nowhere
        } else {
            situation.nproc_at()
        };
        Ok(Bounds {
            rlimits,
            nproc: (nproc_at != NprocAt::Nowhere)
                .then(|| capped(Resource::Nproc, limits.processes)),
            nproc_at,
            joins,
        })
    }

    /// Between fork and exec, before the tool enters its view: joins the limit cgroups
    /// and — when it counts the worker's namespace — sets the process limit.
    /// Async-signal-safe.
    pub fn apply_before_view(&self) -> io::Result<()> {
        for fd in &self.joins {
            subzero_sys::cgroup::join(fd.as_fd())?;
        }
        if self.nproc_at == NprocAt::BeforeUserNamespace
            && let Some(n) = self.nproc
        {
            set(Resource::Nproc, n)?;
        }
        Ok(())
    }

    /// After the tool entered its view (which opens descriptors of its own, while the child
    /// still holds every descriptor of the worker until exec): the per-process limits, and
    /// the process limit when it counts only the tool's own user namespace.
    /// Async-signal-safe.
    pub fn apply_after_view(&self) -> io::Result<()> {
        for &(resource, value) in &self.rlimits {
            set(resource, value)?;
        }
        // A write past RLIMIT_FSIZE raises SIGXFSZ, whose default ends the process with a
        // core dump; ignored, the write fails with EFBIG, which is what tools handle
        // (`dd`, `cp` and every runtime report it). Ignored dispositions survive exec.
        subzero_sys::signal::ignore(Signal::XFSZ);
        if self.nproc_at == NprocAt::AfterUserNamespace
            && let Some(n) = self.nproc
        {
            set(Resource::Nproc, n)?;
        }
        Ok(())
    }
}

/// Writes `file` of the limit cgroup `dir` and opens its `cgroup.procs` for the tools to
/// join; the errors name the file.
fn limit_and_open(dir: &Path, file: &str, value: u64) -> io::Result<OwnedFd> {
    let cgroup = Cgroup::at(dir);
    cgroup.set_limit(file, value)?;
    cgroup.procs_for_joining().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot open {}/cgroup.procs: {e}", dir.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_bounded_only_by_a_cgroup_and_says_so() {
        let situation = Situation {
            initial_root: true,
            own_user_namespace: false,
            tool_user_namespace: false,
        };
        let m = situation.mechanisms(Some(ToolLimits::SHIPPED));
        if cgroups().pids.is_none() {
            assert_eq!(m.processes.limit, None);
            assert!(m.processes.mechanism.starts_with("none: root"));
        }
        assert_eq!(m.file_size.limit, Some(4 << 30));
    }

    #[test]
    fn in_its_own_user_namespace_the_worker_bounds_the_tree_and_elsewhere_the_call() {
        let own = Situation {
            initial_root: false,
            own_user_namespace: true,
            tool_user_namespace: true,
        };
        assert_eq!(own.nproc_at(), NprocAt::BeforeUserNamespace);
        let per_call = Situation {
            own_user_namespace: false,
            ..own
        };
        assert_eq!(per_call.nproc_at(), NprocAt::AfterUserNamespace);
        let neither = Situation {
            tool_user_namespace: false,
            ..per_call
        };
        assert_eq!(neither.nproc_at(), NprocAt::Nowhere);
    }
}
