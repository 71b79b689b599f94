//! Per-run budgets: what a spawn may ask for, bounded by configured maxima, and what a run
//! reports when it reaches one.
//!
//! A spawn names any of five budgets; an absent one takes the configured default, one past
//! its maximum is refused with `limit_exceeded` before anything is created. The resolved
//! values are frozen into the grant snapshot's [`RunLimits`] and apply to every run of the
//! child.

use serde::{Deserialize, Serialize};

use crate::limits::{LimitExceeded, LimitName};
use crate::template::RunLimits;

/// One budget, spelled as on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BudgetName {
    /// Model turns per run.
    MaxTurns,
    /// Wall-clock milliseconds per run.
    DeadlineMs,
    /// Milliseconds of one tool call.
    ToolTimeoutMs,
    /// Output tokens of one model response.
    MaxOutputTokens,
    /// Input plus output tokens across the run.
    TokenBudget,
}

impl BudgetName {
    /// The wire spelling (`maxTurns`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            BudgetName::MaxTurns => "maxTurns",
            BudgetName::DeadlineMs => "deadlineMs",
            BudgetName::ToolTimeoutMs => "toolTimeoutMs",
            BudgetName::MaxOutputTokens => "maxOutputTokens",
            BudgetName::TokenBudget => "tokenBudget",
        }
    }

    const fn limit(self) -> LimitName {
        match self {
            BudgetName::MaxTurns => LimitName::MaxTurns,
            BudgetName::DeadlineMs => LimitName::DeadlineMs,
            BudgetName::ToolTimeoutMs => LimitName::ToolTimeoutMs,
            BudgetName::MaxOutputTokens => LimitName::MaxOutputTokens,
            BudgetName::TokenBudget => LimitName::TokenBudget,
        }
    }

    const fn what(self) -> &'static str {
        match self {
            BudgetName::MaxTurns => "budget maxTurns (turns)",
            BudgetName::DeadlineMs => "budget deadlineMs (ms)",
            BudgetName::ToolTimeoutMs => "budget toolTimeoutMs (ms)",
            BudgetName::MaxOutputTokens => "budget maxOutputTokens (tokens)",
            BudgetName::TokenBudget => "budget tokenBudget (tokens)",
        }
    }
}

impl std::fmt::Display for BudgetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The budget a run reached: which, its value, and what the run had used.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetReached {
    pub budget: BudgetName,
    pub limit: u64,
    pub reached: u64,
}

/// What a spawn asks for; `None` takes the default.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetRequest {
    pub max_turns: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub tool_timeout_ms: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub token_budget: Option<u64>,
}

/// The most a spawn may ask for; `token_budget: None` means no maximum.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct BudgetMaxima {
    pub max_turns: u32,
    pub deadline_ms: u64,
    pub tool_timeout_ms: u64,
    pub max_output_tokens: u32,
    pub token_budget: Option<u64>,
}

/// Defaults and maxima in force (`[budgets]` of the config).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Budgets {
    pub defaults: RunLimits,
    pub maxima: BudgetMaxima,
}

impl Default for Budgets {
    fn default() -> Self {
        Self::SEED
    }
}

impl Budgets {
    /// The shipped policy: the seed's per-run limits as defaults; maxima of 500 turns,
    /// 8 hours, 1 hour per tool call, 128,000 output tokens, and no token maximum.
    pub const SEED: Budgets = Budgets {
        defaults: RunLimits {
            max_turns: 48,
            deadline_ms: 1_800_000,
            tool_timeout_ms: 180_000,
            max_output_tokens: 8192,
            token_budget: None,
        },
        maxima: BudgetMaxima {
            max_turns: 500,
            deadline_ms: 8 * 3_600_000,
            tool_timeout_ms: 3_600_000,
            max_output_tokens: 128_000,
            token_budget: None,
        },
    };

    /// Defaults that pass their maxima make no sense; the message names the first one.
    /// A token maximum without a default makes the maximum the default, so every run is
    /// bounded once a maximum exists.
    pub fn new(defaults: RunLimits, maxima: BudgetMaxima) -> Result<Self, String> {
        let mut defaults = defaults;
        if defaults.token_budget.is_none() {
            defaults.token_budget = maxima.token_budget;
        }
        let pairs = [
            (
                BudgetName::MaxTurns,
                u64::from(defaults.max_turns),
                Some(u64::from(maxima.max_turns)),
            ),
            (
                BudgetName::DeadlineMs,
                defaults.deadline_ms,
                Some(maxima.deadline_ms),
            ),
            (
                BudgetName::ToolTimeoutMs,
                defaults.tool_timeout_ms,
                Some(maxima.tool_timeout_ms),
            ),
            (
                BudgetName::MaxOutputTokens,
                u64::from(defaults.max_output_tokens),
                Some(u64::from(maxima.max_output_tokens)),
            ),
            (
                BudgetName::TokenBudget,
                defaults.token_budget.unwrap_or(1),
                maxima.token_budget,
            ),
        ];
        for (name, default, max) in pairs {
            if default == 0 || max == Some(0) {
                return Err(format!("budget {name} must be at least 1"));
            }
            if let Some(max) = max
                && default > max
            {
                return Err(format!(
                    "the default of budget {name} ({default}) passes its maximum ({max})"
                ));
            }
        }
        Ok(Self { defaults, maxima })
    }

    /// The limits a spawn asking for `request` runs under, or the first budget past its
    /// maximum (nothing was created).
    pub fn resolve(&self, request: &BudgetRequest) -> Result<RunLimits, LimitExceeded> {
        let d = &self.defaults;
        let m = &self.maxima;
        let pick = |name: BudgetName, asked: Option<u64>, default: u64, max: Option<u64>| {
            let value = asked.unwrap_or(default);
            match max {
                Some(max) if value > max => Err(LimitExceeded {
                    limit: name.limit(),
                    max,
                    actual: value,
                    what: name.what(),
                }),
                _ => Ok(value),
            }
        };
        let narrow = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
        let max_turns = pick(
            BudgetName::MaxTurns,
            request.max_turns,
            u64::from(d.max_turns),
            Some(u64::from(m.max_turns)),
        )?;
        let deadline_ms = pick(
            BudgetName::DeadlineMs,
            request.deadline_ms,
            d.deadline_ms,
            Some(m.deadline_ms),
        )?;
        let tool_timeout_ms = pick(
            BudgetName::ToolTimeoutMs,
            request.tool_timeout_ms,
            d.tool_timeout_ms,
            Some(m.tool_timeout_ms),
        )?;
        let max_output_tokens = pick(
            BudgetName::MaxOutputTokens,
            request.max_output_tokens,
            u64::from(d.max_output_tokens),
            Some(u64::from(m.max_output_tokens)),
        )?;
        let token_budget = match request.token_budget.or(d.token_budget) {
            Some(asked) => Some(pick(
                BudgetName::TokenBudget,
                Some(asked),
                asked,
                m.token_budget,
            )?),
            None => None,
        };
        Ok(RunLimits {
            max_turns: narrow(max_turns),
            deadline_ms,
            tool_timeout_ms,
            max_output_tokens: narrow(max_output_tokens),
            token_budget,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_fields_take_the_defaults() {
        let limits = Budgets::SEED.resolve(&BudgetRequest::default()).unwrap();
        assert_eq!(limits, RunLimits::default());
    }

    #[test]
    fn asked_values_within_the_maxima_are_frozen() {
        let asked = BudgetRequest {
            max_turns: Some(3),
            token_budget: Some(5000),
            ..BudgetRequest::default()
        };
        let limits = Budgets::SEED.resolve(&asked).unwrap();
        assert_eq!(limits.max_turns, 3);
        assert_eq!(limits.token_budget, Some(5000));
        assert_eq!(limits.deadline_ms, 1_800_000);
    }

    #[test]
    fn a_value_past_its_maximum_names_the_budget() {
        let asked = BudgetRequest {
            max_turns: Some(501),
            ..BudgetRequest::default()
        };
        let err = Budgets::SEED.resolve(&asked).unwrap_err();
        assert_eq!(err.limit, LimitName::MaxTurns);
        assert_eq!((err.max, err.actual), (500, 501));
        let text = err.to_string();
        assert!(text.contains("maxTurns") && text.contains("500"), "{text}");
    }

    #[test]
    fn a_token_maximum_bounds_every_run() {
        let maxima = BudgetMaxima {
            token_budget: Some(10_000),
            ..Budgets::SEED.maxima
        };
        let budgets = Budgets::new(RunLimits::default(), maxima).unwrap();
        let limits = budgets.resolve(&BudgetRequest::default()).unwrap();
        assert_eq!(limits.token_budget, Some(10_000));
        let over = BudgetRequest {
            token_budget: Some(10_001),
            ..BudgetRequest::default()
        };
        assert_eq!(
            budgets.resolve(&over).unwrap_err().limit,
            LimitName::TokenBudget
        );
    }

    #[test]
    fn defaults_past_their_maxima_are_refused() {
        let maxima = BudgetMaxima {
            max_turns: 10,
            ..Budgets::SEED.maxima
        };
        let err = Budgets::new(RunLimits::default(), maxima).unwrap_err();
        assert!(err.contains("maxTurns"), "{err}");
    }
}
