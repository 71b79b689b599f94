//! Building the wire values the broker answers with and sends to workers.
//!
//! The broker constructs the generated protocol types directly, so a misspelt field is a
//! compile error. Their bounded newtypes (patterns, lengths) still check what the broker
//! puts in them: a value one of them refuses is a broker bug, answered as `internal`
//! naming the document and the field, never sent malformed.

pub(in crate::broker) mod events;
pub(in crate::broker) mod snapshot;

use std::fmt;
use std::num::NonZeroU64;

use crate::broker::BrokerError;

/// `value` as the wire type `T`, for field `field` (a JSON path) of the document `what`
/// (`"get result"`, `"start_run message"`, …).
pub(in crate::broker) fn wire<T, V>(value: V, what: &str, field: &str) -> Result<T, BrokerError>
where
    T: TryFrom<V>,
    T::Error: fmt::Display,
{
    T::try_from(value).map_err(|e| broken(what, field, e))
}

/// `value` as a positive wire integer.
pub(in crate::broker) fn positive(
    value: impl Into<u64>,
    what: &str,
    field: &str,
) -> Result<NonZeroU64, BrokerError> {
    NonZeroU64::new(value.into()).ok_or_else(|| broken(what, field, "must be at least 1"))
}

/// The `internal` error for a value the contract refuses.
pub(in crate::broker) fn broken(
    what: &str,
    field: &str,
    problem: impl fmt::Display,
) -> BrokerError {
    BrokerError::internal(format!(
        "the {what} breaks the contract at {field}: {problem}"
    ))
}

#[cfg(test)]
mod tests {
    use subzero_protocol as p;

    use super::*;

    #[test]
    fn every_stored_phase_has_its_wire_spelling() {
        use subzero_core::Phase;
        for phase in Phase::ALL {
            assert_eq!(p::Phase::from(*phase).to_string(), phase.as_str());
        }
    }

    #[test]
    fn a_value_the_contract_refuses_is_an_internal_error_naming_the_field() {
        let refused = wire::<p::TemplateId, _>("Not A Template", "get result", "templateId");
        let err = refused.expect_err("the pattern refuses spaces and capitals");
        assert_eq!(err.code(), subzero_core::ErrorCode::Internal);
        assert!(
            err.message()
                .starts_with("the get result breaks the contract at templateId: "),
            "{}",
            err.message()
        );
        assert!(positive(0u32, "info result", "limits.promptBytes").is_err());
    }
}
