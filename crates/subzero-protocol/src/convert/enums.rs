//! The closed enums (states, statuses, budget names, phases, error codes, built-in tool
//! names) both ways, and a terminal run status only from a terminal core status.

use std::fmt;
use std::num::NonZeroU64;

use subzero_core::template as core_template;

use crate::v1::{common, error, template};

/// Implements `From` both ways between a core enum and its wire twin with the same
/// variant names.
macro_rules! same_enum {
    ($core:ty, $wire:ty { $($variant:ident),+ $(,)? }) => {
        impl From<$core> for $wire {
            fn from(value: $core) -> Self {
                match value {
                    $(<$core>::$variant => <$wire>::$variant),+
                }
            }
        }

        impl From<$wire> for $core {
            fn from(value: $wire) -> Self {
                match value {
                    $(<$wire>::$variant => <$core>::$variant),+
                }
            }
        }
    };
}

same_enum!(
    subzero_core::ChildState,
    common::ChildState {
        Ready,
        Running,
        Interrupted,
    }
);

same_enum!(
    subzero_core::RunStatus,
    common::RunStatus {
        Queued,
        Running,
        StopRequested,
        Stopped,
        Completed,
        BudgetExhausted,
        Failed,
        Interrupted,
    }
);

same_enum!(
    subzero_core::BudgetName,
    common::BudgetName {
        MaxTurns,
        DeadlineMs,
        ToolTimeoutMs,
        MaxOutputTokens,
        TokenBudget,
    }
);

impl From<&common::BudgetReached> for subzero_core::BudgetReached {
    fn from(value: &common::BudgetReached) -> Self {
        Self {
            budget: value.budget.into(),
            limit: value.limit.get(),
            reached: value.reached,
        }
    }
}

impl From<&subzero_core::BudgetReached> for common::BudgetReached {
    fn from(value: &subzero_core::BudgetReached) -> Self {
        Self {
            budget: value.budget.into(),
            limit: NonZeroU64::new(value.limit).unwrap_or(NonZeroU64::MIN),
            reached: value.reached,
        }
    }
}

same_enum!(
    subzero_core::Phase,
    common::Phase {
        Idle,
        Starting,
        Model,
        Tool,
        Stopping,
        RecoveryRequired,
    }
);

same_enum!(
    subzero_core::ErrorCode,
    error::ErrorCode {
        InvalidRequest,
        NotFound,
        CredentialsRequired,
        TemplateNotFound,
        UnsupportedGrant,
        LimitExceeded,
        WorkspaceBusy,
        Busy,
        RecoveryRequired,
        StaleRun,
        NotRunning,
        UnsupportedSteer,
        CheckpointIncompatible,
        WorkerIncompatible,
        ArtifactUnavailable,
        RequestConflict,
        ModelRequestFailed,
        ContextExhausted,
        RuntimeShuttingDown,
        Interrupted,
        StorageUnavailable,
        NotIsolatable,
        ChangeConflict,
        ChangeUnavailable,
        Internal,
    }
);

same_enum!(
    core_template::BuiltinTool,
    template::GrantedToolName {
        Read,
        Grep,
        Find,
        Ls,
        Write,
        Edit,
        Bash,
    }
);

impl From<common::TerminalRunStatus> for subzero_core::RunStatus {
    fn from(value: common::TerminalRunStatus) -> Self {
        match value {
            common::TerminalRunStatus::Completed => Self::Completed,
            common::TerminalRunStatus::BudgetExhausted => Self::BudgetExhausted,
            common::TerminalRunStatus::Failed => Self::Failed,
            common::TerminalRunStatus::Stopped => Self::Stopped,
            common::TerminalRunStatus::Interrupted => Self::Interrupted,
        }
    }
}

/// A run status that is not terminal where the wire wants a terminal one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotTerminal(pub subzero_core::RunStatus);

impl fmt::Display for NotTerminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run status `{}` is not terminal", self.0)
    }
}

impl std::error::Error for NotTerminal {}

impl TryFrom<subzero_core::RunStatus> for common::TerminalRunStatus {
    type Error = NotTerminal;
    fn try_from(value: subzero_core::RunStatus) -> Result<Self, NotTerminal> {
        use subzero_core::RunStatus as S;
        match value {
            S::Completed => Ok(Self::Completed),
            S::BudgetExhausted => Ok(Self::BudgetExhausted),
            S::Failed => Ok(Self::Failed),
            S::Stopped => Ok(Self::Stopped),
            S::Interrupted => Ok(Self::Interrupted),
            S::Queued | S::Running | S::StopRequested => Err(NotTerminal(value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use subzero_core::{ChildState, ErrorCode, RunStatus};

    use super::*;

    /// Every core value of `$core` crosses to the wire and back unchanged, and is spelled
    /// on the wire as the core spells it.
    fn same_spelling<C, W>(all: &[C], core_text: impl Fn(C) -> String)
    where
        C: Copy + PartialEq + fmt::Debug + From<W>,
        W: From<C> + serde::Serialize,
    {
        for value in all {
            let wire = W::from(*value);
            let spelled = serde_json::to_value(&wire).unwrap_or_default();
            assert_eq!(spelled, core_text(*value), "{value:?}");
            assert_eq!(C::from(wire), *value);
        }
    }

    #[test]
    fn every_core_state_status_code_and_tool_has_the_same_wire_spelling() {
        same_spelling::<_, common::ChildState>(ChildState::ALL, |s| s.as_str().into());
        same_spelling::<_, common::RunStatus>(RunStatus::ALL, |s| s.as_str().into());
        same_spelling::<_, error::ErrorCode>(&ErrorCode::ALL, |c| c.as_str().into());
        same_spelling::<_, template::GrantedToolName>(&core_template::BuiltinTool::ALL, |t| {
            t.as_str().into()
        });
    }

    #[test]
    fn only_terminal_statuses_become_terminal_run_statuses() {
        for status in RunStatus::ALL {
            let terminal = common::TerminalRunStatus::try_from(*status);
            assert_eq!(terminal.is_ok(), status.is_terminal(), "{status:?}");
            if let Ok(t) = terminal {
                assert_eq!(RunStatus::from(t), *status);
            }
        }
    }
}

same_enum!(
    subzero_core::CheckoutState,
    common::CheckoutState {
        Prepared,
        InUse,
        SettledChanged,
        SettledUnchanged,
        Applied,
        Discarded,
        Removed,
    }
);

same_enum!(
    core_template::Isolation,
    common::Isolation { Shared, Checkout }
);
