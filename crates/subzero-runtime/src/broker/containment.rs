//! The containment receipts that every worker of this broker shares — who holds the
//! ownership locks, what tool processes cannot see, how their resources are bounded —
//! for `subzero_info` and each child's `subzero_get`.
//!
//! All workers of a broker come from one spawner, with one configuration, on one kernel,
//! so the handshake worker of each worker kind says in its `hello` what every worker of that
//! kind gives; a child's receipts are those of its own worker (its snapshot's `worker`: the
//! Pi worker confines Node, which holds the key, as a tool process, and says so in
//! `worker`), with the values of its frozen snapshot added to the resource bounds. A
//! receipt is left out rather than guessed when no worker could be asked.

use subzero_core::template::ToolLimits;
use subzero_protocol as p;

use super::Broker;
use super::network::network_receipt;
use crate::supervisor::Hello;

/// The tool limits a snapshot froze (the shipped ones for a snapshot frozen before they
/// existed).
fn tool_limits_of(snapshot: &p::GrantSnapshot) -> [u64; 4] {
    let limits = snapshot
        .tool_limits
        .as_ref()
        .and_then(|l| ToolLimits::try_from(l).ok())
        .unwrap_or(ToolLimits::SHIPPED);
    [
        limits.processes,
        limits.memory_bytes,
        limits.file_size_bytes,
        limits.open_files,
    ]
}

/// `resources` with `limits` (processes, memory, file size, open files) filled in where a
/// mechanism bounds the resource.
fn with_limits(resources: &p::ResourceReceipt, limits: [u64; 4]) -> p::ResourceReceipt {
    let fill = |bound: &p::ResourceBound, value: u64| p::ResourceBound {
        limit: match bound.scope {
            p::ResourceScope::None => None,
            _ => std::num::NonZeroU64::new(value),
        },
        ..bound.clone()
    };
    p::ResourceReceipt {
        processes: fill(&resources.processes, limits[0]),
        memory: fill(&resources.memory, limits[1]),
        file_size: fill(&resources.file_size, limits[2]),
        open_files: fill(&resources.open_files, limits[3]),
    }
}

/// Everything `hello` says the kernel enforces for its worker kind's children
/// (`subzero_info.workers[].containment`).
pub(super) fn support_of(hello: &Hello) -> p::ContainmentSupport {
    p::ContainmentSupport {
        filesystem: hello.filesystem.clone(),
        network: hello.network.clone(),
        process: hello.process.clone(),
        ownership: hello.ownership.clone(),
        view: hello.view.clone(),
        resources: hello.resources.clone(),
        worker: hello.worker.clone(),
    }
}

impl Broker {
    /// Adds `ownership`, `view` and `resources` of `hello` to `subzero_info`'s
    /// `enforcement.containment`.
    pub(super) fn support_receipts(hello: &Hello, support: &mut p::ContainmentSupport) {
        support.ownership = hello.ownership.clone();
        support.view = hello.view.clone();
        support.network = hello.network.clone();
        support.resources = hello.resources.clone();
    }

    /// Adds `ownership`, `view`, `resources` and, for a worker whose tools run in the
    /// key-holding process, `worker` to one child's `containment`: its own worker's.
    pub(super) async fn child_receipts(
        &self,
        snapshot: &p::GrantSnapshot,
        containment: &mut p::ChildContainment,
    ) {
        let Some(hello) = self.hello_of(snapshot).await else {
            return;
        };
        containment.ownership = hello.ownership.clone();
        containment.view = hello.view.clone();
        containment.network = network_receipt(snapshot, &hello);
        containment.resources = hello
            .resources
            .as_ref()
            .map(|r| with_limits(r, tool_limits_of(snapshot)));
        containment.worker = hello.worker.clone();
    }
}
