//! Filesystem enforcement as the broker sees it: what its workers say the kernel lets them
//! enforce (`containment.filesystem` of their `hello`, probed at worker start), the refusal
//! of a grant that needs that enforcement where the workers cannot give it, and the
//! receipts `subzero_info` and `subzero_get` carry.
//!
//! The broker does not enforce anything itself: every worker builds the Landlock ruleset of
//! its child's grant and each tool process applies it (`subzero-worker`
//! `containment/landlock.rs`). All workers of a broker come from one spawner, on one
//! kernel, with one `[containment] filesystem` setting, so the handshake worker's hello
//! speaks for all of them.

use subzero_core::ErrorCode;
use subzero_core::template::{FilesystemAccess, GrantSnapshot};
use subzero_protocol as p;

use super::wire::wire;
use super::{Broker, BrokerError};
use crate::supervisor::Hello;

/// What a worker too old to report it is assumed to give: nothing.
const NOT_REPORTED: &str =
    "none: the worker does not report filesystem enforcement, so none is applied";

/// What the grant of one child asks of the kernel.
struct Needs {
    access: FilesystemAccess,
    /// The template requires enforcement, or a non-write-capable grant has `bash` (only
    /// the kernel keeps that `bash` from writing).
    kernel: bool,
}

impl Needs {
    fn of_core(snapshot: &GrantSnapshot) -> Self {
        let fs = snapshot.filesystem();
        Needs {
            access: fs.access,
            kernel: fs.require_enforcement
                || (!snapshot.write_capable() && snapshot.tools().iter().any(|t| t == "bash")),
        }
    }

    fn of_wire(snapshot: &p::GrantSnapshot) -> Self {
        let access = match snapshot.filesystem.as_ref().map(|f| f.access) {
            Some(p::FilesystemAccess::ReadOnly) => FilesystemAccess::ReadOnly,
            Some(p::FilesystemAccess::Workspace) => FilesystemAccess::Workspace,
            None if snapshot.write_capable => FilesystemAccess::Workspace,
            None => FilesystemAccess::ReadOnly,
        };
        let require = snapshot
            .filesystem
            .as_ref()
            .is_some_and(|f| f.require_enforcement);
        let bash = snapshot.tools.contains(&p::GrantedToolName::Bash);
        Needs {
            access,
            kernel: require || (!snapshot.write_capable && bash),
        }
    }
}

/// The Landlock ABI the workers apply, and `landlock-abi-N` or `none: <why>`.
fn support(hello: &Hello) -> (Option<u64>, String) {
    match &hello.filesystem {
        Some(fs) => (fs.landlock_abi.map(|abi| abi.get()), fs.summary.to_string()),
        None => (None, NOT_REPORTED.to_owned()),
    }
}

impl Broker {
    /// Refuses at spawn, before anything is written or any model is called, a grant whose
    /// filesystem restriction must be kernel-enforced where the workers cannot enforce it.
    pub(super) async fn check_filesystem(
        &self,
        snapshot: &GrantSnapshot,
    ) -> Result<(), BrokerError> {
        self.refuse_unenforceable(snapshot.template_id().as_str(), Needs::of_core(snapshot))
            .await
    }

    /// [`Broker::check_filesystem`] for a stored snapshot at resume.
    pub(super) async fn check_stored_filesystem(
        &self,
        snapshot: &p::GrantSnapshot,
    ) -> Result<(), BrokerError> {
        self.refuse_unenforceable(snapshot.template_id.as_str(), Needs::of_wire(snapshot))
            .await
    }

    async fn refuse_unenforceable(&self, template: &str, needs: Needs) -> Result<(), BrokerError> {
        if !needs.kernel {
            return Ok(());
        }
        let hello = self
            .hello_for(subzero_core::template::WorkerKind::Rust)
            .await?;
        match support(&hello) {
            (Some(_), _) => Ok(()),
            (None, why) => Err(BrokerError::new(
                ErrorCode::UnsupportedGrant,
                format!(
                    "template `{template}` needs a kernel-enforced {} filesystem, but the workers cannot enforce one ({why}); enable Landlock (see `subzero doctor`) or drop require_enforcement from the template; nothing was spawned",
                    needs.access.as_str()
                ),
            )),
        }
    }

    /// `enforcement.containment.filesystem` and `enforcement.landlock` of `subzero_info`.
    pub(super) fn filesystem_support(
        hello: &Hello,
    ) -> Result<(p::FilesystemSupport, Option<std::num::NonZeroU64>), BrokerError> {
        let (abi, summary) = support(hello);
        let abi = abi.and_then(std::num::NonZeroU64::new);
        Ok((
            p::FilesystemSupport {
                landlock_abi: abi,
                summary: wire(
                    summary.as_str(),
                    "subzero_info",
                    "enforcement.containment.filesystem.summary",
                )?,
            },
            abi,
        ))
    }

    /// `containment.filesystem` of one child's snapshot (`subzero_get`): the enforcement its
    /// tool processes run under on this broker's machine, as its own worker reports it.
    /// `None` when that worker could not be asked (the snapshot then says nothing rather
    /// than guess).
    pub(super) async fn filesystem_receipt(
        &self,
        snapshot: &p::GrantSnapshot,
    ) -> Option<p::FilesystemEnforcement> {
        let hello = self.hello_of(snapshot).await?;
        let access = Needs::of_wire(snapshot).access;
        let (abi, why) = support(&hello);
        let summary = match abi {
            Some(abi) => format!("landlock-abi-{abi} {}", access.as_str()),
            None => format!("{why}; writes are not restricted"),
        };
        Some(p::FilesystemEnforcement {
            access: match access {
                FilesystemAccess::ReadOnly => p::FilesystemAccess::ReadOnly,
                FilesystemAccess::Workspace => p::FilesystemAccess::Workspace,
            },
            enforced: abi.is_some(),
            landlock_abi: abi.and_then(std::num::NonZeroU64::new),
            summary: wire(
                summary.as_str(),
                "subzero_get",
                "containment.filesystem.summary",
            )
            .ok()?,
        })
    }
}
