//! What every tool process does to itself between fork and exec, in one place and in
//! order: each `bash` command and each MCP server is confined by [`confine`] and nothing
//! else.
//!
//! 1. join the worker's tool cgroup (the cgroup path) and the limit cgroups;
//! 2. take its resource bounds — the per-process rlimits, and the process limit where it
//!    must be set before the tool's own user namespace ([`super::limits`]); then, for a
//!    network grant other than `open`, join the tools' network namespace
//!    ([`super::network`]);
//! 3. enter its view of the filesystem without Subzero's state, configuration and
//!    credentials ([`super::view`]), then the process limit where it must follow;
//! 4. as root, give up the powers that could leave the network namespace; give up the capability the worker keeps in its own user namespace
//!    (`subzero_sys::caps`);
//! 5. enforce the run's Landlock ruleset ([`super::landlock`]) — last, because a Landlock
//!    domain may no longer mount.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::landlock::{self, Access, Grant, Ruleset};
use super::limits::{Bounds, Situation, ToolLimits};
use super::network::ToolNet;
use super::view::{self, ToolView};

/// One run's confinement of its tool processes, prepared before the first is forked.
#[derive(Debug, Clone, Default)]
pub struct ToolJail {
    pub bounds: Option<Arc<Bounds>>,
    pub view: Option<Arc<ToolView>>,
    pub filesystem: Option<Arc<Ruleset>>,
    pub network: Option<ToolNet>,
}

impl ToolJail {
    /// The run's Landlock ruleset, when the kernel enforces one.
    pub fn filesystem(&self) -> Option<&Ruleset> {
        self.filesystem.as_deref()
    }
}

/// Prepares one run's jail from its snapshot: the Landlock ruleset, the tools' view (the
/// workspace, the scratch directory, the writable paths and the MCP server programs stay
/// visible) and the resource bounds. `Err` is the `unsupported_grant` message: the grant
/// needs what the kernel cannot give, or a part could not be built (tools never run less
/// confined than the receipts say).
pub fn prepare(
    snapshot: &subzero_protocol::GrantSnapshot,
    root: &Path,
    scratch: &Path,
) -> Result<ToolJail, String> {
    let filesystem = landlock::prepare(snapshot, root, scratch)?.map(Arc::new);
    let mut keep = vec![scratch.to_path_buf(), root.to_path_buf()];
    if let Access::Workspace { writable } = Grant::of(snapshot).access {
        keep.extend(writable);
    }
    keep.extend(
        snapshot
            .mcp_servers
            .iter()
            .map(|s| PathBuf::from(s.command.as_str()))
            .filter(|p| p.is_absolute()),
    );
    let view = ToolView::prepare(&keep)
        .map_err(|e| format!("unsupported_grant: the tools' view cannot be prepared: {e}"))?
        .map(Arc::new);
    let network = ToolNet::prepare(snapshot.network.as_ref())?;
    let situation = situation();
    let bounds = Bounds::prepare(limits_of(snapshot), situation)
        .map_err(|e| format!("unsupported_grant: the tool limits cannot be enforced: {e}"))?;
    Ok(ToolJail {
        bounds: Some(Arc::new(bounds)),
        view,
        filesystem,
        network,
    })
}

/// Where this worker runs, for the bounds: observed once.
pub fn situation() -> Situation {
    static SITUATION: std::sync::OnceLock<Situation> = std::sync::OnceLock::new();
    *SITUATION.get_or_init(|| {
        let hiding = view::hiding();
        Situation::observe(hiding.in_force() && hiding.user_namespace())
    })
}

/// The snapshot's tool limits, or the shipped ones for a snapshot frozen before them.
pub fn limits_of(snapshot: &subzero_protocol::GrantSnapshot) -> ToolLimits {
    let Some(frozen) = &snapshot.tool_limits else {
        return ToolLimits::SHIPPED;
    };
    // The contract's ranges are positive, checked when the line was read.
    let positive = |v: i64| u64::try_from(v).unwrap_or(1).max(1);
    ToolLimits {
        processes: frozen.processes.0.get(),
        memory_bytes: positive(frozen.memory_bytes.0),
        file_size_bytes: positive(frozen.file_size_bytes.0),
        open_files: positive(frozen.open_files.0),
    }
}

/// Puts `cmd` in its own process group and adds the confinement hook.
pub fn confine(cmd: &mut std::process::Command, jail: &ToolJail) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    super::cgroup::confine(cmd);
    if let Some(net) = &jail.network {
        cmd.envs(net.env().iter().copied());
    }
    let jail = jail.clone();
    let landlock = jail.filesystem.as_ref().map(|r| r.pre_exec());
    let mut landlock = landlock;
    // SAFETY: the hook runs between fork and exec and makes only async-signal-safe system
    // calls on memory prepared before the fork (the jail's parts are built in full
    // beforehand and only read here); it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(bounds) = &jail.bounds {
                bounds.apply_before_view()?;
            }
            if let Some(net) = &jail.network {
                net.enter()?;
            }
            if let Some(view) = &jail.view {
                view.enter()?;
            }
            if let Some(bounds) = &jail.bounds {
                bounds.apply_after_view()?;
            }
            if let Some(net) = &jail.network {
                net.give_up_powers()?;
            }
            subzero_sys::caps::drop_before_exec()?;
            if let Some(restrict) = landlock.as_mut() {
                restrict()?;
            }
            Ok(())
        });
    }
}
