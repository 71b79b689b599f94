//! The network grant as the broker sees it: what its workers say the kernel lets them do
//! (`containment.network` of their `hello`, probed at worker start), the refusal of a grant
//! that needs a network namespace where the workers cannot make one, and the receipt
//! `subzero_get` carries. The worker does the confining (`subzero-worker`
//! `containment/network`); as with the filesystem, the handshake worker's hello speaks for
//! every worker of this broker.

use subzero_core::ErrorCode;
use subzero_core::template::NetworkGrant;
use subzero_protocol as p;

use super::wire::wire;
use super::{Broker, BrokerError};
use crate::supervisor::Hello;

/// What a worker too old to report it gives: no namespace.
const NOT_REPORTED: &str = "none: the worker does not report network confinement";

/// Whether `hello` says tool processes get a network namespace, and its summary.
fn support(hello: &Hello) -> (bool, String) {
    match &hello.network {
        Some(n) => (n.namespace, n.summary.to_string()),
        None => (false, NOT_REPORTED.to_owned()),
    }
}

/// The mode and hosts of a stored snapshot's grant (`open` for one frozen before grants).
fn stored_grant(snapshot: &p::GrantSnapshot) -> (p::NetworkMode, usize) {
    snapshot
        .network
        .as_ref()
        .map_or((p::NetworkMode::Open, 0), |n| {
            (n.mode, n.hosts.as_ref().map_or(0, |h| h.len()))
        })
}

impl Broker {
    /// Refuses at spawn, before anything is written or any model is called, a grant other
    /// than `open` where the workers cannot give tool processes a network namespace.
    pub(super) async fn check_network(&self, grant: &NetworkGrant) -> Result<(), BrokerError> {
        if !grant.needs_namespace() {
            return Ok(());
        }
        self.refuse_without_namespace(grant.mode()).await
    }

    /// [`Broker::check_network`] for a stored snapshot at resume.
    pub(super) async fn check_stored_network(
        &self,
        snapshot: &p::GrantSnapshot,
    ) -> Result<(), BrokerError> {
        match stored_grant(snapshot).0 {
            p::NetworkMode::Open => Ok(()),
            p::NetworkMode::None => self.refuse_without_namespace("none").await,
            p::NetworkMode::Allowlist => self.refuse_without_namespace("allowlist").await,
        }
    }

    async fn refuse_without_namespace(&self, mode: &str) -> Result<(), BrokerError> {
        let hello = self
            .hello_for(subzero_core::template::WorkerKind::Rust)
            .await?;
        match support(&hello) {
            (true, _) => Ok(()),
            (false, why) => Err(BrokerError::new(
                ErrorCode::UnsupportedGrant,
                format!(
                    "the template's network grant is `{mode}`, which needs a network namespace for its tool processes, but the workers cannot make one ({why}); see `subzero doctor`, or set network = \"open\" in the template to let its tools reach any address; nothing was spawned"
                ),
            )),
        }
    }
}

/// `containment.network` of one child (`subzero_get`): its grant and whether its worker
/// enforces it. `None` when the summary breaks the contract (it never should).
pub(super) fn network_receipt(
    snapshot: &p::GrantSnapshot,
    hello: &Hello,
) -> Option<p::NetworkEnforcement> {
    let (mode, hosts) = stored_grant(snapshot);
    let (namespace, why) = support(hello);
    let (enforced, summary) = match mode {
        p::NetworkMode::Open => (true, "open: the worker's network".to_owned()),
        _ if !namespace => (false, format!("{why}; the tools cannot run")),
        p::NetworkMode::None => (true, "network namespace, loopback only".to_owned()),
        p::NetworkMode::Allowlist => (
            true,
            format!(
                "network namespace; the proxy at 127.0.0.1:3128 admits {hosts} host{}",
                if hosts == 1 { "" } else { "s" }
            ),
        ),
    };
    Some(p::NetworkEnforcement {
        mode,
        enforced,
        summary: wire(
            summary.as_str(),
            "subzero_get",
            "containment.network.summary",
        )
        .ok()?,
    })
}
