//! Per-workspace capacity held by the kernel: N worker slot files and M writer slot
//! files per scope. A run takes one worker slot (and, when write-capable, one writer
//! slot) with a non-blocking exclusive lock; if every slot is held the answer is
//! `workspace_busy`. Because the slots are `flock`s, the caps hold across brokers and
//! a crashed holder frees its slot at once.

use std::os::fd::OwnedFd;

use crate::error::{RuntimeError, RuntimeResult};
use crate::locks::HeldLock;
use crate::paths::StatePaths;
use crate::scope::WorkspaceScope;

/// Which cap a slot counts against.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SlotKind {
    /// Active workers per workspace (default 4).
    Worker,
    /// Write-capable runs per workspace (default 1).
    Writer,
}

impl SlotKind {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            SlotKind::Worker => "worker",
            SlotKind::Writer => "writer",
        }
    }
}

/// One held slot.
#[derive(Debug)]
pub struct SlotGuard {
    kind: SlotKind,
    index: u32,
    lock: HeldLock,
}

impl SlotGuard {
    /// Which cap.
    pub fn kind(&self) -> SlotKind {
        self.kind
    }

    /// Which slot file (0-based).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Hand the slot to a worker so its whole tree keeps it held; see
    /// [`HeldLock::into_fd`].
    pub fn into_fd(self) -> OwnedFd {
        self.lock.into_fd()
    }
}

/// Take any free slot of `kind` among `capacity` slot files of `scope`.
pub fn try_take_slot(
    paths: &StatePaths,
    scope: &WorkspaceScope,
    kind: SlotKind,
    capacity: u32,
) -> RuntimeResult<SlotGuard> {
    let key = scope.key();
    for index in 0..capacity {
        if let Some(lock) = HeldLock::try_exclusive(&paths.slot_lock(&key, kind.as_str(), index))? {
            return Ok(SlotGuard { kind, index, lock });
        }
    }
    let what = match kind {
        SlotKind::Worker => "active workers",
        SlotKind::Writer => "write-capable runs",
    };
    Err(RuntimeError::WorkspaceBusy(format!(
        "workspace {} already has {capacity} {what} (the limit, shared by every broker); wait for one to settle, stop one, or raise the limit in the config [limits]",
        scope.root().display()
    )))
}
