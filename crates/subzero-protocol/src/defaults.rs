//! The defaults the schemas state in their descriptions. The wire leaves an omitted
//! optional property omitted (so documents round-trip unchanged); the broker applies these.

use std::num::NonZeroU64;

use crate::{GetInput, GetInputWaitFor, ListInput, ModelApi, ModelRef, OutputInput, StopInput};

/// `subzero_get` / `subzero_stop` `waitMs` when omitted.
pub const WAIT_MS: i64 = 0;
/// Upper bound of every `waitMs`.
pub const WAIT_MS_MAX: i64 = 30_000;
/// `subzero_get` `eventLimit` when omitted.
pub const EVENT_LIMIT: u64 = 20;
/// `subzero_get` `previewLimit` when omitted.
pub const PREVIEW_LIMIT: i64 = 1024;
/// `subzero_list` `limit` when omitted.
pub const LIST_LIMIT: u64 = 50;
/// `subzero_output` `length` when omitted (and its maximum).
pub const OUTPUT_LENGTH: u64 = 65_536;
/// The share of a known context window (percent) past which the worker compacts a child's
/// transcript before the next request (`subzero_info` `limits.compactAtPercent`).
pub const COMPACT_AT_PERCENT: u64 = 80;

impl GetInput {
    /// `waitMs`, default 0.
    pub fn wait_ms_or_default(&self) -> i64 {
        self.wait_ms.as_ref().map_or(WAIT_MS, |w| w.0)
    }

    /// `cursor`, default 0.
    pub fn cursor_or_default(&self) -> u64 {
        self.cursor.unwrap_or(0)
    }

    /// `eventLimit`, default 20.
    pub fn event_limit_or_default(&self) -> u64 {
        self.event_limit.as_ref().map_or(EVENT_LIMIT, |l| l.0.get())
    }

    /// `previewLimit`, default 1024.
    pub fn preview_limit_or_default(&self) -> i64 {
        self.preview_limit.as_ref().map_or(PREVIEW_LIMIT, |l| l.0)
    }

    /// `waitFor`, default `settled`.
    pub fn wait_for_or_default(&self) -> GetInputWaitFor {
        self.wait_for.unwrap_or(GetInputWaitFor::Settled)
    }
}

impl ListInput {
    /// `limit`, default 50.
    pub fn limit_or_default(&self) -> u64 {
        self.limit.as_ref().map_or(LIST_LIMIT, |l| l.0.get())
    }
}

impl StopInput {
    /// `waitMs`, default 0.
    pub fn wait_ms_or_default(&self) -> i64 {
        self.wait_ms.as_ref().map_or(WAIT_MS, |w| w.0)
    }
}

impl OutputInput {
    /// `offset`, default 0.
    pub fn offset_or_default(&self) -> u64 {
        self.offset.unwrap_or(0)
    }

    /// `length`, default 65536.
    pub fn length_or_default(&self) -> u64 {
        self.length
            .as_ref()
            .map_or(OUTPUT_LENGTH, |l| NonZeroU64::get(l.0))
    }
}

impl ModelRef {
    /// `api`, default `openai-completions` (never inferred from the URL).
    pub fn api_or_default(&self) -> ModelApi {
        self.api.unwrap_or(ModelApi::OpenaiCompletions)
    }
}
