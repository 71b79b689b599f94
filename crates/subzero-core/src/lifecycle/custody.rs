//! Custody: which broker may drive a child, and the phase the child shows.
//!
//! The kernel lock on a child is the proof that a process holds it; [`Custody`] is the
//! stored record of it: nobody, one broker (by its owner token), or "a previous owner's
//! processes may still hold the lock". Claims, releases, owner checks, recoveries and
//! the phase are decided here from the child's state and that record, so the runtime
//! writes what these functions return and nothing else. A refusal is a typed
//! [`CustodyRefused`] and nothing changed.

use super::any::{ActiveChild, AnyChild};
use super::error::{LifecycleError, NotRunning};
use super::storage::StorageKey;
use std::fmt;

use crate::error_code::{Coded, Described, ErrorCode};
use crate::ids::ChildId;
use crate::state::{ChildState, Ownership, Phase};

/// A child's custody record: its state, who holds it and the claim generation.
///
/// The fields are private: a custody comes from [`Custody::spawned`], from one of the
/// decisions below, or from storage through [`Custody::load`], which needs the store's
/// [`StorageKey`]. So nobody can hand the store a custody (an owner, a generation) the
/// core did not decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Custody {
    child: ChildId,
    state: ChildState,
    ownership: Ownership,
    owner: Option<String>,
    generation: u64,
}

/// A custody as stored: plain data, made into a [`Custody`] by [`Custody::load`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustodyRecord {
    /// Who holds the child.
    pub ownership: Ownership,
    /// The holding broker's token (kept while `recovery_required`, to name the holder).
    pub owner: Option<String>,
    /// Bumped by every claim, so a recovery observed at one generation cannot undo a
    /// later claim.
    pub generation: u64,
}

/// What a recovering broker found on the child's kernel lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LockObservation {
    /// The recovering broker took the lock: nothing of the old owner lives.
    Free,
    /// Some process still holds the lock.
    Held,
}

/// What recovery of a child whose owner is gone must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// The record changed since it was observed, or needs nothing; leave it.
    Unchanged,
    /// A process still holds the lock: the child waits as `recovery_required`.
    Hold(Custody),
    /// An idle child with a stale owner: the record is cleared.
    Release(Custody),
    /// The active run's worker is gone: the child must lose its worker
    /// ([`AnyChild::lose_worker`]) and then has this custody.
    LoseWorker(Custody),
}

/// Why a custody request was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustodyRefused {
    /// Another broker holds the child.
    OwnedByOther {
        /// The child.
        child: ChildId,
    },
    /// The caller already holds it.
    AlreadyClaimed {
        /// The child.
        child: ChildId,
    },
    /// The caller does not hold it.
    NotClaimed {
        /// The child.
        child: ChildId,
    },
    /// Processes of a previous owner may still hold the child's lock.
    HeldByPrevious {
        /// The child.
        child: ChildId,
    },
    /// The record says running but names no owner: only recovery can clear it.
    RunningWithoutOwner {
        /// The child.
        child: ChildId,
    },
}

impl Described for CustodyRefused {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CustodyRefused::OwnedByOther { child } => write!(
                f,
                "child {child} is owned by another broker; wait for its run to settle, then retry"
            ),
            CustodyRefused::AlreadyClaimed { child } => {
                write!(f, "child {child} is already claimed by this broker")
            }
            CustodyRefused::NotClaimed { child } => {
                write!(
                    f,
                    "child {child} is not claimed by this broker; claim it first"
                )
            }
            CustodyRefused::HeldByPrevious { child } => write!(
                f,
                "child {child} is still held by processes of a previous owner; wait for them to exit (subzero doctor names them), then retry"
            ),
            CustodyRefused::RunningWithoutOwner { child } => write!(
                f,
                "child {child} is recorded as running without an owner; run startup recovery first"
            ),
        }
    }
}

crate::coded_display!(CustodyRefused);

impl std::error::Error for CustodyRefused {}

impl Coded for CustodyRefused {
    fn code(&self) -> ErrorCode {
        match self {
            CustodyRefused::OwnedByOther { .. }
            | CustodyRefused::AlreadyClaimed { .. }
            | CustodyRefused::NotClaimed { .. } => ErrorCode::Busy,
            CustodyRefused::HeldByPrevious { .. } | CustodyRefused::RunningWithoutOwner { .. } => {
                ErrorCode::RecoveryRequired
            }
        }
    }
}

impl Custody {
    /// The custody of `child` (in `state`) as the store holds it. Only the store has the
    /// key: a custody is otherwise only what the core decided.
    pub fn load(
        child: ChildId,
        state: ChildState,
        record: CustodyRecord,
        _key: &StorageKey,
    ) -> Custody {
        let CustodyRecord {
            ownership,
            owner,
            generation,
        } = record;
        Custody {
            child,
            state,
            ownership,
            owner,
            generation,
        }
    }

    /// The child.
    pub fn child(&self) -> ChildId {
        self.child
    }

    /// Its lifecycle state.
    pub fn state(&self) -> ChildState {
        self.state
    }

    /// Who holds it.
    pub fn ownership(&self) -> Ownership {
        self.ownership
    }

    /// The holding broker's token (kept while `recovery_required`, to name the holder).
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The claim generation, bumped by every claim.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The plain data to store.
    pub fn record(&self) -> CustodyRecord {
        CustodyRecord {
            ownership: self.ownership,
            owner: self.owner.clone(),
            generation: self.generation,
        }
    }

    /// A child just spawned is held by its spawner (whose broker took its lock before
    /// admitting it) from the start: claim generation 1.
    pub fn spawned(child: &AnyChild, token: &str) -> Custody {
        Custody {
            child: child.id(),
            state: child.state(),
            ownership: Ownership::Owned,
            owner: Some(token.to_owned()),
            generation: 1,
        }
    }

    fn held_by(&self, token: &str) -> bool {
        self.ownership == Ownership::Owned && self.owner.as_deref() == Some(token)
    }

    fn idle(&self) -> bool {
        matches!(self.state, ChildState::Ready | ChildState::Interrupted)
    }

    /// Why `token` may not act on the child now.
    fn refusal(&self, token: &str) -> CustodyRefused {
        let child = self.child;
        match self.ownership {
            Ownership::RecoveryRequired => CustodyRefused::HeldByPrevious { child },
            Ownership::Owned if self.owner.as_deref() == Some(token) => {
                CustodyRefused::AlreadyClaimed { child }
            }
            Ownership::Owned => CustodyRefused::OwnedByOther { child },
            Ownership::None if self.state == ChildState::Running => {
                CustodyRefused::RunningWithoutOwner { child }
            }
            Ownership::None => CustodyRefused::NotClaimed { child },
        }
    }

    /// `token` (whose broker holds the child's kernel lock) claims an idle, unowned
    /// child; the generation goes up by one.
    pub fn claim(&self, token: &str) -> Result<Custody, CustodyRefused> {
        if self.ownership != Ownership::None || !self.idle() {
            return Err(self.refusal(token));
        }
        Ok(Custody {
            ownership: Ownership::Owned,
            owner: Some(token.to_owned()),
            generation: self.generation + 1,
            ..self.clone()
        })
    }

    /// `token` gives back its claim on an idle child.
    pub fn release(&self, token: &str) -> Result<Custody, CustodyRefused> {
        if !self.held_by(token) || !self.idle() {
            return Err(match self.refusal(token) {
                CustodyRefused::AlreadyClaimed { child } => CustodyRefused::NotClaimed { child },
                other => other,
            });
        }
        Ok(self.freed())
    }

    /// Whether `token` holds the child (and so may write its events, phase and runs).
    pub fn check_owner(&self, token: &str) -> Result<(), CustodyRefused> {
        if self.held_by(token) {
            Ok(())
        } else {
            Err(match self.refusal(token) {
                CustodyRefused::AlreadyClaimed { child } => CustodyRefused::NotClaimed { child },
                other => other,
            })
        }
    }

    /// Whether some broker holds the child, whichever: a follow-up queued behind its
    /// active run is served by that broker's worker.
    pub fn check_held(&self) -> Result<(), CustodyRefused> {
        match self.ownership {
            Ownership::Owned => Ok(()),
            Ownership::RecoveryRequired => {
                Err(CustodyRefused::HeldByPrevious { child: self.child })
            }
            Ownership::None => Err(self.refusal("")),
        }
    }

    /// The record once a run ended with nothing after it: free, or — when an
    /// interrupted worker's tree is not proven gone — `recovery_required`, keeping the
    /// token so the holder can be named.
    pub fn at_rest(&self, state: ChildState, tree_gone: bool) -> Custody {
        if tree_gone {
            Custody {
                state,
                ..self.freed()
            }
        } else {
            Custody {
                state,
                ownership: Ownership::RecoveryRequired,
                ..self.clone()
            }
        }
    }

    /// The record after a resume by its holder: still held when a run starts, free
    /// when the child comes back ready.
    pub fn resumed(&self, state: ChildState) -> Custody {
        if state == ChildState::Running {
            Custody {
                state,
                ..self.clone()
            }
        } else {
            Custody {
                state,
                ..self.freed()
            }
        }
    }

    /// Recovery of a child whose owner is gone, observed at `observed_generation`
    /// with its lock as `lock`.
    pub fn recover(&self, observed_generation: u64, lock: LockObservation) -> Recovery {
        let needs = self.ownership != Ownership::None || self.state == ChildState::Running;
        if self.generation != observed_generation || !needs {
            return Recovery::Unchanged;
        }
        match lock {
            LockObservation::Held => Recovery::Hold(Custody {
                ownership: Ownership::RecoveryRequired,
                ..self.clone()
            }),
            LockObservation::Free if self.idle() => Recovery::Release(self.freed()),
            LockObservation::Free => Recovery::LoseWorker(Custody {
                state: ChildState::Interrupted,
                ..self.freed()
            }),
        }
    }

    /// The phase a child shows when it is not reporting work: `recovery_required`
    /// while a previous owner may hold it, `stopping` while a stop is pending,
    /// `starting` for a run no worker reported on yet, else `idle`.
    pub fn phase_of(&self, child: &AnyChild) -> Phase {
        if self.ownership == Ownership::RecoveryRequired {
            return Phase::RecoveryRequired;
        }
        match child {
            AnyChild::Active(ActiveChild::Running(_)) => Phase::Starting,
            AnyChild::Active(ActiveChild::Stopping(_)) => Phase::Stopping,
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => Phase::Idle,
        }
    }

    /// This custody for the child in `state` (a decision that moved the child keeps who
    /// holds it).
    pub(crate) fn in_state(self, state: ChildState) -> Custody {
        Custody { state, ..self }
    }

    fn freed(&self) -> Custody {
        Custody {
            ownership: Ownership::None,
            owner: None,
            ..self.clone()
        }
    }
}

/// What a worker reports it is doing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Activity {
    /// Waiting for the model.
    Model,
    /// Running a tool.
    Tool,
}

impl AnyChild {
    /// The phase after the worker reports `activity`: that activity while the run runs;
    /// `stopping` stays `stopping` (the worker finishing a tool does not undo a stop
    /// request); a child with no active run takes no report.
    pub fn report_activity(&self, activity: Activity) -> Result<Phase, LifecycleError> {
        match self {
            AnyChild::Active(ActiveChild::Running(_)) => Ok(match activity {
                Activity::Model => Phase::Model,
                Activity::Tool => Phase::Tool,
            }),
            AnyChild::Active(ActiveChild::Stopping(_)) => Ok(Phase::Stopping),
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => Err(NotRunning {
                child: self.id(),
                state: self.state(),
                run: None,
                what: "a worker activity report",
                advice: "only a child with an active run has a worker to report",
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custody(state: ChildState, ownership: Ownership, owner: Option<&str>) -> Custody {
        Custody {
            child: ChildId::generate(),
            state,
            ownership,
            owner: owner.map(str::to_owned),
            generation: 3,
        }
    }

    #[test]
    fn claim_takes_only_an_idle_unowned_child() {
        let free = custody(ChildState::Ready, Ownership::None, None);
        let claimed = free.claim("a").unwrap();
        assert_eq!(claimed.ownership, Ownership::Owned);
        assert_eq!(claimed.generation, 4);
        assert!(matches!(
            claimed.claim("a"),
            Err(CustodyRefused::AlreadyClaimed { .. })
        ));
        assert!(matches!(
            claimed.claim("b"),
            Err(CustodyRefused::OwnedByOther { .. })
        ));
        let held = custody(ChildState::Ready, Ownership::RecoveryRequired, Some("a"));
        assert_eq!(
            held.claim("b").unwrap_err().code(),
            ErrorCode::RecoveryRequired
        );
        let orphan = custody(ChildState::Running, Ownership::None, None);
        assert!(matches!(
            orphan.claim("a"),
            Err(CustodyRefused::RunningWithoutOwner { .. })
        ));
    }

    #[test]
    fn release_and_owner_checks_name_the_caller() {
        let ours = custody(ChildState::Interrupted, Ownership::Owned, Some("a"));
        assert!(ours.check_owner("a").is_ok());
        assert!(matches!(
            ours.check_owner("b"),
            Err(CustodyRefused::OwnedByOther { .. })
        ));
        assert_eq!(ours.release("a").unwrap().ownership, Ownership::None);
        let running = custody(ChildState::Running, Ownership::Owned, Some("a"));
        assert!(matches!(
            running.release("a"),
            Err(CustodyRefused::NotClaimed { .. })
        ));
    }

    #[test]
    fn recovery_follows_the_lock_and_the_generation() {
        let running = custody(ChildState::Running, Ownership::Owned, Some("a"));
        assert_eq!(
            running.recover(2, LockObservation::Free),
            Recovery::Unchanged
        );
        assert!(matches!(
            running.recover(3, LockObservation::Held),
            Recovery::Hold(c) if c.ownership == Ownership::RecoveryRequired
        ));
        assert!(matches!(
            running.recover(3, LockObservation::Free),
            Recovery::LoseWorker(c) if c.state == ChildState::Interrupted && c.owner.is_none()
        ));
        let idle = custody(ChildState::Ready, Ownership::Owned, Some("a"));
        assert!(matches!(
            idle.recover(3, LockObservation::Free),
            Recovery::Release(c) if c.ownership == Ownership::None
        ));
        let clean = custody(ChildState::Ready, Ownership::None, None);
        assert_eq!(clean.recover(3, LockObservation::Held), Recovery::Unchanged);
    }
}
