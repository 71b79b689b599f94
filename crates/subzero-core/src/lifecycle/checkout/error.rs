//! Why a checkout transition was refused. A refused transition changed nothing and gave
//! the checkout back.

use std::fmt;

use crate::error_code::{Coded, Described, ErrorCode};
use crate::ids::ChildId;
use crate::state::CheckoutState;

/// The evidence offered is not about this checkout: another child, another base, or a
/// landing of another head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongEvidence {
    /// The child whose checkout was asked to move.
    pub child: ChildId,
    /// What did not match.
    pub reason: String,
}

/// The checkout's state has no such transition (asked at run time, on an
/// [`AnyCheckout`](super::AnyCheckout); in types it does not compile). An apply or a
/// discard without a settled change is `change_unavailable`; any other is
/// `invalid_request`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutNotAllowed {
    /// The child whose checkout was asked to move.
    pub child: ChildId,
    /// Its state.
    pub state: CheckoutState,
    /// The refused transition, e.g. "apply".
    pub what: &'static str,
}

impl Described for WrongEvidence {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let WrongEvidence { child, reason } = self;
        write!(
            f,
            "the checkout of child {child} was not changed: {reason}; record the checkout again and retry with that evidence"
        )
    }
}

impl Described for CheckoutNotAllowed {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CheckoutNotAllowed { child, state, what } = self;
        let advice = match state {
            CheckoutState::Prepared | CheckoutState::InUse => {
                "wait until its run settles and its change is recorded"
            }
            CheckoutState::SettledUnchanged => {
                "it holds no change; run in it again or remove it with its child"
            }
            CheckoutState::SettledChanged => "apply or discard its change first",
            CheckoutState::Applied | CheckoutState::Discarded | CheckoutState::Removed => {
                "it is final; read the checkout's state and start from there"
            }
        };
        write!(
            f,
            "{what} is not a transition of a {state} checkout (child {child}); {advice}"
        )
    }
}

impl Coded for WrongEvidence {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidRequest
    }
}

impl Coded for CheckoutNotAllowed {
    fn code(&self) -> ErrorCode {
        match self.what {
            "apply" | "discard" => ErrorCode::ChangeUnavailable,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

crate::coded_display!(WrongEvidence, CheckoutNotAllowed);
impl std::error::Error for WrongEvidence {}
impl std::error::Error for CheckoutNotAllowed {}

/// Every refusal of a checkout transition at run time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckoutRefused {
    /// See [`WrongEvidence`].
    #[error(transparent)]
    Evidence(#[from] WrongEvidence),
    /// See [`CheckoutNotAllowed`].
    #[error(transparent)]
    NotAllowed(#[from] CheckoutNotAllowed),
}

impl Coded for CheckoutRefused {
    fn code(&self) -> ErrorCode {
        match self {
            CheckoutRefused::Evidence(e) => e.code(),
            CheckoutRefused::NotAllowed(e) => e.code(),
        }
    }
}

impl Described for CheckoutRefused {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckoutRefused::Evidence(e) => e.describe(f),
            CheckoutRefused::NotAllowed(e) => e.describe(f),
        }
    }
}
