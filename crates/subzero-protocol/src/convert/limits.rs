//! Run limits to the wire, tool limits both ways.

use std::num::NonZeroU64;

use subzero_core::template as core_template;

use super::OutOfContract;
use crate::v1::grant_snapshot;

fn positive(value: u64, field: &str) -> Result<NonZeroU64, OutOfContract> {
    NonZeroU64::new(value).ok_or_else(|| OutOfContract::new(field, "must be at least 1"))
}

impl TryFrom<&core_template::RunLimits> for grant_snapshot::RunLimits {
    type Error = OutOfContract;
    fn try_from(limits: &core_template::RunLimits) -> Result<Self, OutOfContract> {
        Ok(Self {
            deadline_ms: positive(limits.deadline_ms, "limits.deadlineMs")?,
            max_output_tokens: positive(
                u64::from(limits.max_output_tokens),
                "limits.maxOutputTokens",
            )?,
            max_turns: positive(u64::from(limits.max_turns), "limits.maxTurns")?,
            token_budget: limits
                .token_budget
                .map(|budget| positive(budget, "limits.tokenBudget"))
                .transpose()?,
            tool_timeout_ms: positive(limits.tool_timeout_ms, "limits.toolTimeoutMs")?,
        })
    }
}

/// `value` as a wire integer of type `T` (an `i64` newtype), or the field it breaks.
fn wire_i64<T: From<i64>>(value: u64, field: &str) -> Result<T, OutOfContract> {
    i64::try_from(value)
        .map(T::from)
        .map_err(|_| OutOfContract::new(field, "is past the largest integer the wire carries"))
}

/// A wire `i64` as the core's `u64`, or the field it breaks (a negative value).
fn core_u64(value: i64, field: &str) -> Result<u64, OutOfContract> {
    u64::try_from(value).map_err(|_| OutOfContract::new(field, "must not be negative"))
}

/// The core's resolved tool limits as the snapshot's (and `subzero_info`'s) `toolLimits`.
/// Each field keeps its value; its range is the wire type's `Validate` (and the core's
/// `ToolLimits::check`) to judge.
impl TryFrom<&core_template::ToolLimits> for grant_snapshot::ToolLimits {
    type Error = OutOfContract;
    fn try_from(limits: &core_template::ToolLimits) -> Result<Self, OutOfContract> {
        Ok(Self {
            file_size_bytes: wire_i64(limits.file_size_bytes, "toolLimits.fileSizeBytes")?,
            memory_bytes: wire_i64(limits.memory_bytes, "toolLimits.memoryBytes")?,
            open_files: wire_i64(limits.open_files, "toolLimits.openFiles")?,
            processes: positive(limits.processes, "toolLimits.processes")?.into(),
        })
    }
}

/// The wire's `toolLimits` as the core's.
impl TryFrom<&grant_snapshot::ToolLimits> for core_template::ToolLimits {
    type Error = OutOfContract;
    fn try_from(limits: &grant_snapshot::ToolLimits) -> Result<Self, OutOfContract> {
        Ok(Self {
            processes: limits.processes.0.get(),
            memory_bytes: core_u64(limits.memory_bytes.0, "toolLimits.memoryBytes")?,
            file_size_bytes: core_u64(limits.file_size_bytes.0, "toolLimits.fileSizeBytes")?,
            open_files: core_u64(limits.open_files.0, "toolLimits.openFiles")?,
        })
    }
}
