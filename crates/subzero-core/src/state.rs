//! Value-level child and run states, as stored and sent on the wire.
//!
//! The typestate markers in `lifecycle` are the compile-time view of the same states;
//! these enums are what a database row or a JSON document holds.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored and wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parse the stored and wire spelling.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum!(
    /// The state of a child session.
    ChildState {
        /// No active run and no worker; the transcript is at its last completed leaf.
        Ready => "ready",
        /// A run is active (running or stop requested); more may be queued.
        Running => "running",
        /// Execution ended without a confirmed terminal result; only `resume` continues it.
        Interrupted => "interrupted",
    }
);

wire_enum!(
    /// The status of a run.
    RunStatus {
        /// Waiting behind the active run.
        Queued => "queued",
        /// Being processed by the worker.
        Running => "running",
        /// A matching stop was accepted; the worker has not confirmed yet.
        StopRequested => "stop_requested",
        /// The worker confirmed cancellation and its process tree is gone.
        Stopped => "stopped",
        /// Finished with a result; its transcript leaf is recorded.
        Completed => "completed",
        /// Reached a budget; the result is the child's handoff summary and its leaf is
        /// recorded.
        BudgetExhausted => "budget_exhausted",
        /// Finished with an error (model, limit, grant, checkpoint).
        Failed => "failed",
        /// Ended without a confirmed terminal result (worker or broker lost).
        Interrupted => "interrupted",
    }
);

wire_enum!(
    /// Who may drive a child, as recorded. The kernel lock is the proof that a process
    /// holds a child; this is the record of it (see [`crate::lifecycle::custody`]).
    Ownership {
        /// Nobody; a broker may claim it once it holds the child's lock.
        None => "none",
        /// A broker claimed it; its owner token names the broker.
        Owned => "owned",
        /// The owner is gone but processes of it may still hold the child's lock.
        RecoveryRequired => "recovery_required",
    }
);

wire_enum!(
    /// What a child is doing right now, for display; its state is the truth.
    Phase {
        /// Nothing active.
        Idle => "idle",
        /// A worker is being started for the active run.
        Starting => "starting",
        /// The worker waits for the model.
        Model => "model",
        /// The worker runs a tool.
        Tool => "tool",
        /// A stop of the active run was requested.
        Stopping => "stopping",
        /// The previous owner's processes may still hold the child's lock.
        RecoveryRequired => "recovery_required",
    }
);

wire_enum!(
    /// The state of a child's isolated checkout, as the ledger stores it (the typestate
    /// markers are in [`crate::lifecycle::checkout`]).
    CheckoutState {
        /// Created on disk; no run has used it yet.
        Prepared => "prepared",
        /// A run of its child is active in it.
        InUse => "in_use",
        /// No active run; its change was recorded (a head commit and its stats).
        SettledChanged => "settled_changed",
        /// No active run; it was recorded as unchanged.
        SettledUnchanged => "settled_unchanged",
        /// Its change landed in the main checkout.
        Applied => "applied",
        /// It was explicitly thrown away, change and all.
        Discarded => "discarded",
        /// An unchanged checkout, removed with its child.
        Removed => "removed",
    }
);

impl CheckoutState {
    /// Whether no transition leaves this state.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            CheckoutState::Applied | CheckoutState::Discarded | CheckoutState::Removed
        )
    }
}

impl RunStatus {
    /// Whether no transition leaves this status.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Stopped
                | RunStatus::Completed
                | RunStatus::BudgetExhausted
                | RunStatus::Failed
                | RunStatus::Interrupted
        )
    }

    /// Whether this is the child's active run (running or stop requested).
    pub const fn is_active(self) -> bool {
        matches!(self, RunStatus::Running | RunStatus::StopRequested)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_match_serde() {
        for s in ChildState::ALL {
            assert_eq!(ChildState::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in Ownership::ALL {
            assert_eq!(Ownership::parse(s.as_str()), Some(*s));
        }
        for s in Phase::ALL {
            assert_eq!(Phase::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in CheckoutState::ALL {
            assert_eq!(CheckoutState::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
