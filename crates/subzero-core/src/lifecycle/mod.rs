//! Typestate lifecycles of children, runs and isolated checkouts, their capability tokens, and the
//! value-level twins used at the storage boundary.
//!
//! See `docs/lifecycle.md` for the diagrams, the transition table and the compile-fail
//! cases that document what cannot be written.

pub mod any;
pub mod checkout;
pub mod child;
pub mod custody;
pub mod decided;
pub mod error;
pub mod proof;
pub mod run;
pub mod step;
pub mod storage;

pub use any::{
    ActiveChild, ActiveRunRecord, AnyChild, AnyRun, ChildRecord, Delivery, QueuedRunRecord,
    Resumed, RunRecord, RunReport, Settlement, StopReceipt, WorkerLost, WrongState,
};
pub use checkout::{
    AnyCheckout, ChangeRecord, Checkout, CheckoutCommit, CheckoutDecided, CheckoutOrigin,
    CheckoutRecord, CheckoutRefused, CheckoutSite, DiffStats, GitOid, LandingSeen, RecordedChange,
    RecordedNoChange,
};
pub use child::{Child, Compaction, LostWorker, Next, Ready, Settled, StopAccepted, Stopping};
pub use custody::{Activity, Custody, CustodyRecord, CustodyRefused, LockObservation, Recovery};
pub use decided::{
    Admitted, Commit, Decided, NamedRun, Recovered, RunEnding, RunMove, SettledRun, Spawned,
};
pub use error::LifecycleError;
pub use proof::{
    Checkpoint, CompactionReported, LeafRecorded, LeafRef, ObservedLeaf, Steering, StopConfirmed,
    Supervisor, WorkerCapabilities,
};
pub use run::{Failure, Run};
pub use step::{Landing, StepTo};
pub use storage::{Loaded, Origin, StorageKey, StoredChild};

mod sealed {
    /// Seals the state traits: no state can be added outside this crate.
    pub trait Sealed {}
}
