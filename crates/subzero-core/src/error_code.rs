//! The closed set of stable error codes shared by every boundary.
//!
//! The enum is generated (`cargo xtask codegen`) from the one table of codes,
//! `$defs/ErrorCode` in `schema-src/v1/error.schema.json`: each value's description is the
//! code's meaning and, after `Next step:`, what the caller does next — both are here as
//! [`ErrorCode::meaning`] and [`ErrorCode::next_step`]. A code never changes meaning once
//! released (v1 is additive only). Messages may be reworded; callers branch on the code.

use std::fmt;

// prettyplease output, compared byte for byte by `cargo xtask check`: rustfmt leaves it.
#[rustfmt::skip]
#[path = "../../../generated/core/error_code.rs"]
mod table;

pub use table::ErrorCode;

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Anything that can report a stable code.
pub trait Coded {
    /// The stable code for this error.
    fn code(&self) -> ErrorCode;
}

/// An error whose message is written apart from its code: its `Display` is
/// `code: message` ([`coded_display!`](crate::coded_display)), and [`Described::message`]
/// is the message alone, so an error body takes code and message as they are instead of
/// parsing the code back out of the text.
pub trait Described: Coded {
    /// Writes what went wrong and what to do next, without the code.
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// The message, without the code.
    fn message(&self) -> String
    where
        Self: Sized,
    {
        Message(self).to_string()
    }
}

/// The message of a [`Described`] error, as `Display`.
struct Message<'a, E>(&'a E);

impl<E: Described> fmt::Display for Message<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.describe(f)
    }
}

/// Implements `Display` as `code: message` for [`Described`] types.
#[macro_export]
macro_rules! coded_display {
    ($($ty:ty),+ $(,)?) => {$(
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}: ", $crate::Coded::code(self))?;
                $crate::Described::describe(self, f)
            }
        }
    )+};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_matches_serde() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn every_code_says_what_it_means_and_what_to_do_next() {
        for code in ErrorCode::ALL {
            assert!(!code.meaning().is_empty(), "{code}");
            assert!(!code.next_step().is_empty(), "{code}");
        }
    }
}
