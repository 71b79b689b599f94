//! [`AnyCheckout`]: a checkout in any state, for the storage boundary. Built by one
//! checked [`AnyCheckout::load`] (with the store's key), stored by
//! [`AnyCheckout::record`]; `From<Checkout<S>>` goes down and `TryFrom<AnyCheckout>` goes
//! up. Its operations dispatch to the typed transitions and turn a transition the state
//! does not have into a typed refusal, giving the checkout back.

use super::error::{CheckoutNotAllowed, CheckoutRefused};
use super::{
    Applied, ChangeRecord, Changed, Checkout, CheckoutDecided, CheckoutPhase, CheckoutRecord,
    CheckoutSite, Discarded, InUse, LandingSeen, Prepared, RecordedChange, RecordedNoChange,
    Removed, Settled, Unchanged,
};
use crate::ids::ChildId;
use crate::lifecycle::any::WrongState;
use crate::lifecycle::error::LoadError;
use crate::lifecycle::storage::StorageKey;
use crate::state::CheckoutState;

/// A checkout in any state.
#[derive(Debug)]
pub enum AnyCheckout {
    /// On disk, no run yet.
    Prepared(Checkout<Prepared>),
    /// A run is active in it.
    InUse(Checkout<InUse>),
    /// Settled with a recorded change.
    Changed(Checkout<Settled<Changed>>),
    /// Settled without a change.
    Unchanged(Checkout<Settled<Unchanged>>),
    /// Its change landed.
    Applied(Checkout<Applied>),
    /// Thrown away.
    Discarded(Checkout<Discarded>),
    /// Removed with its child.
    Removed(Checkout<Removed>),
}

/// A refused value-level transition: the checkout, unchanged, and why.
pub type Refusal = (AnyCheckout, CheckoutRefused);

/// Calls `$body` with the typed checkout, whatever its state.
macro_rules! each {
    ($any:expr, |$c:ident| $body:expr) => {
        match $any {
            AnyCheckout::Prepared($c) => $body,
            AnyCheckout::InUse($c) => $body,
            AnyCheckout::Changed($c) => $body,
            AnyCheckout::Unchanged($c) => $body,
            AnyCheckout::Applied($c) => $body,
            AnyCheckout::Discarded($c) => $body,
            AnyCheckout::Removed($c) => $body,
        }
    };
}

/// A checkout's fixed parts, waiting for its state.
struct Shell {
    child: ChildId,
    site: CheckoutSite,
    version: u64,
}

impl Shell {
    fn at<S: CheckoutPhase>(self, state: S) -> Checkout<S> {
        let Shell {
            child,
            site,
            version,
        } = self;
        Checkout {
            child,
            site,
            version,
            state,
        }
    }
}

fn load_error(record: &CheckoutRecord, reason: impl Into<String>) -> LoadError {
    LoadError {
        subject: format!("the checkout of {}", record.child),
        reason: reason.into(),
    }
}

/// Whether a checkout in `state` carries a change.
fn carries_change(state: CheckoutState) -> bool {
    matches!(
        state,
        CheckoutState::SettledChanged | CheckoutState::Applied | CheckoutState::Discarded
    )
}

/// Refuses a record that describes no legal checkout.
fn check(record: &CheckoutRecord) -> Result<(), LoadError> {
    let (site, state) = (&record.site, record.state);
    if record.version == 0 {
        return Err(load_error(record, "its row version is 0; rows start at 1"));
    }
    if !site.base.same_kind(&site.workspace_head) {
        return Err(load_error(
            record,
            "its base and workspace head are ids of different hash functions",
        ));
    }
    if site.carried && !site.dirty {
        return Err(load_error(
            record,
            "it carried uncommitted changes from a clean main checkout",
        ));
    }
    match (carries_change(state), &record.change) {
        (true, None) => Err(load_error(
            record,
            format!("a {state} checkout without a change"),
        )),
        (false, Some(c)) => Err(load_error(
            record,
            format!("a {state} checkout carries change {}", c.head),
        )),
        (_, Some(c)) if c.head == site.base || !c.head.same_kind(&site.base) => Err(load_error(
            record,
            format!(
                "its change {} is not a change of base {}",
                c.head, site.base
            ),
        )),
        _ => Ok(()),
    }
}

impl AnyCheckout {
    /// The one checked way from stored data to a checkout, with the store's key. Refuses
    /// (with `internal`) a record that describes no legal state: a change on a state that
    /// has none, none on one that needs it, a head equal to the base, mixed hash kinds, a
    /// carried change from a clean workspace, a row version of 0.
    pub fn load(record: CheckoutRecord, _key: &StorageKey) -> Result<AnyCheckout, LoadError> {
        check(&record)?;
        let CheckoutRecord {
            child,
            state,
            site,
            change,
            version,
        } = record;
        let shell = Shell {
            child,
            site,
            version,
        };
        let changed = |change: Option<ChangeRecord>| {
            change.ok_or_else(|| LoadError {
                subject: format!("the checkout of {child}"),
                reason: format!("a {state} checkout without a change"),
            })
        };
        Ok(match state {
            CheckoutState::Prepared => Self::Prepared(shell.at(Prepared { _private: () })),
            CheckoutState::InUse => Self::InUse(shell.at(InUse { _private: () })),
            CheckoutState::SettledChanged => Self::Changed(shell.at(Settled {
                kind: Changed {
                    change: changed(change)?,
                },
            })),
            CheckoutState::SettledUnchanged => Self::Unchanged(shell.at(Settled {
                kind: Unchanged { _private: () },
            })),
            CheckoutState::Applied => Self::Applied(shell.at(Applied {
                change: changed(change)?,
            })),
            CheckoutState::Discarded => Self::Discarded(shell.at(Discarded {
                change: changed(change)?,
            })),
            CheckoutState::Removed => Self::Removed(shell.at(Removed { _private: () })),
        })
    }

    /// The checkout as stored.
    pub fn record(&self) -> CheckoutRecord {
        each!(self, |c| c.record())
    }

    /// Its state.
    pub fn state(&self) -> CheckoutState {
        each!(self, |c| c.state())
    }

    fn not_allowed(self, what: &'static str) -> Refusal {
        let (child, state) = each!(&self, |c| (c.child(), c.state()));
        let refused = CheckoutNotAllowed { child, state, what };
        (self, refused.into())
    }

    /// A run starts in it (prepared, or settled either way).
    pub fn start_run(self) -> Result<CheckoutDecided<InUse>, Refusal> {
        match self {
            Self::Prepared(c) => Ok(c.start_run()),
            Self::Changed(c) => Ok(c.start_run()),
            Self::Unchanged(c) => Ok(c.start_run()),
            other => Err(other.not_allowed("start_run")),
        }
    }

    /// Its run settled with a recorded change (in use only).
    pub fn settle(
        self,
        change: RecordedChange,
    ) -> Result<CheckoutDecided<Settled<Changed>>, Refusal> {
        match self {
            Self::InUse(c) => c
                .settle(change)
                .map_err(|(c, e)| (Self::InUse(c), e.into())),
            other => Err(other.not_allowed("settle")),
        }
    }

    /// Its run settled without a change (in use only).
    pub fn settle_unchanged(
        self,
        proof: RecordedNoChange,
    ) -> Result<CheckoutDecided<Settled<Unchanged>>, Refusal> {
        match self {
            Self::InUse(c) => c
                .settle_unchanged(proof)
                .map_err(|(c, e)| (Self::InUse(c), e.into())),
            other => Err(other.not_allowed("settle_unchanged")),
        }
    }

    /// Its change landed (settled with a change only).
    pub fn apply(self, landed: LandingSeen) -> Result<CheckoutDecided<Applied>, Refusal> {
        match self {
            Self::Changed(c) => c
                .apply(landed)
                .map_err(|(c, e)| (Self::Changed(c), e.into())),
            other => Err(other.not_allowed("apply")),
        }
    }

    /// Its change thrown away on purpose (settled with a change only).
    pub fn discard(self) -> Result<CheckoutDecided<Discarded>, Refusal> {
        match self {
            Self::Changed(c) => Ok(c.discard()),
            other => Err(other.not_allowed("discard")),
        }
    }

    /// Removed with its child (prepared, or settled unchanged only).
    pub fn remove(self) -> Result<CheckoutDecided<Removed>, Refusal> {
        match self {
            Self::Prepared(c) => Ok(c.remove()),
            Self::Unchanged(c) => Ok(c.remove()),
            other => Err(other.not_allowed("remove")),
        }
    }
}

macro_rules! down_and_up {
    ($($variant:ident => $ty:ty, $expected:literal;)+) => {$(
        impl From<Checkout<$ty>> for AnyCheckout {
            fn from(c: Checkout<$ty>) -> Self {
                AnyCheckout::$variant(c)
            }
        }
        impl TryFrom<AnyCheckout> for Checkout<$ty> {
            type Error = WrongState<AnyCheckout>;
            fn try_from(value: AnyCheckout) -> Result<Self, Self::Error> {
                match value {
                    AnyCheckout::$variant(c) => Ok(c),
                    other => {
                        let found = other.state().as_str();
                        Err(WrongState { value: other, expected: $expected, found })
                    }
                }
            }
        }
    )+};
}

down_and_up! {
    Prepared => Prepared, "prepared checkout";
    InUse => InUse, "in-use checkout";
    Changed => Settled<Changed>, "settled checkout with a change";
    Unchanged => Settled<Unchanged>, "settled unchanged checkout";
    Applied => Applied, "applied checkout";
    Discarded => Discarded, "discarded checkout";
    Removed => Removed, "removed checkout";
}
