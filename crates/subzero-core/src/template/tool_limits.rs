//! Kernel bounds on a child's tool processes: its `bash` commands and MCP servers, and
//! everything they start.
//!
//! The configuration sets them per key (`[tool_limits]` for every template, a template's
//! own `tool_limits` over that, the shipped value under both); spawn freezes the resolved
//! [`ToolLimits`] into the grant snapshot, and the worker asks the kernel to enforce them
//! (`docs/security.md`). A resume reuses the frozen value and never re-reads the config.

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;
const PIB: u64 = 1 << 50;

/// One of the four tool limits, by the name the configuration and the wire give it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ToolLimitKey {
    /// Tasks (processes and threads) of the tool tree.
    Processes,
    /// Memory of the tool processes, in bytes.
    MemoryBytes,
    /// Largest file a tool process may write, in bytes.
    FileSizeBytes,
    /// Open file descriptors of one tool process.
    OpenFiles,
}

impl ToolLimitKey {
    /// Every key, in the order the configuration reference lists them.
    pub const ALL: [ToolLimitKey; 4] = [
        ToolLimitKey::Processes,
        ToolLimitKey::MemoryBytes,
        ToolLimitKey::FileSizeBytes,
        ToolLimitKey::OpenFiles,
    ];

    /// The key in the configuration file (snake_case).
    pub const fn config_key(self) -> &'static str {
        match self {
            ToolLimitKey::Processes => "processes",
            ToolLimitKey::MemoryBytes => "memory_bytes",
            ToolLimitKey::FileSizeBytes => "file_size_bytes",
            ToolLimitKey::OpenFiles => "open_files",
        }
    }

    /// The property in the grant snapshot and `subzero_info` (camelCase).
    pub const fn wire_key(self) -> &'static str {
        match self {
            ToolLimitKey::Processes => "processes",
            ToolLimitKey::MemoryBytes => "memoryBytes",
            ToolLimitKey::FileSizeBytes => "fileSizeBytes",
            ToolLimitKey::OpenFiles => "openFiles",
        }
    }

    /// The values the key may take (the schema's `minimum` and `maximum`).
    pub const fn range(self) -> RangeInclusive<u64> {
        match self {
            ToolLimitKey::Processes => 1..=1_048_576,
            ToolLimitKey::MemoryBytes => 16 * MIB..=TIB,
            ToolLimitKey::FileSizeBytes => MIB..=PIB,
            ToolLimitKey::OpenFiles => 16..=1_048_576,
        }
    }

    /// The range as a person reads it (`16 MiB..=1 TiB`), for messages.
    const fn range_shown(self) -> &'static str {
        match self {
            ToolLimitKey::Processes => "1..=1048576",
            ToolLimitKey::MemoryBytes => "16777216..=1099511627776 (16 MiB..=1 TiB)",
            ToolLimitKey::FileSizeBytes => "1048576..=1125899906842624 (1 MiB..=1 PiB)",
            ToolLimitKey::OpenFiles => "16..=1048576",
        }
    }
}

/// A tool limit set outside its range; shown as `memory_bytes = 0 is outside 16777216..=…`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{} = {value} is outside {}", key.config_key(), key.range_shown())]
pub struct ToolLimitOutOfRange {
    /// The key.
    pub key: ToolLimitKey,
    /// The value it was given.
    pub value: u64,
}

fn check(key: ToolLimitKey, value: u64) -> Result<(), ToolLimitOutOfRange> {
    if key.range().contains(&value) {
        Ok(())
    } else {
        Err(ToolLimitOutOfRange { key, value })
    }
}

/// The kernel bounds on one child's tool processes, as frozen into its grant snapshot
/// (`toolLimits`, camelCase).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolLimits {
    /// Tasks of the tool tree: processes and threads together, as the kernel counts them.
    pub processes: u64,
    /// Memory of the tool processes, in bytes.
    pub memory_bytes: u64,
    /// Largest file a tool process may create or extend, in bytes.
    pub file_size_bytes: u64,
    /// Open file descriptors of one tool process.
    pub open_files: u64,
}

impl ToolLimits {
    /// What a child gets when neither `[tool_limits]` nor its template sets a key, and what
    /// a snapshot frozen before tool limits existed stands for: 4096 tasks, 4 GiB of
    /// memory, 4 GiB per file, 8192 open files. Generous for builds and test suites, small
    /// enough that a fork bomb or a runaway allocation stops at the tree instead of the
    /// machine.
    pub const SHIPPED: ToolLimits = ToolLimits {
        processes: 4096,
        memory_bytes: 4 * GIB,
        file_size_bytes: 4 * GIB,
        open_files: 8192,
    };

    /// The value of `key`.
    pub const fn get(&self, key: ToolLimitKey) -> u64 {
        match key {
            ToolLimitKey::Processes => self.processes,
            ToolLimitKey::MemoryBytes => self.memory_bytes,
            ToolLimitKey::FileSizeBytes => self.file_size_bytes,
            ToolLimitKey::OpenFiles => self.open_files,
        }
    }

    /// The first key outside its range, if any.
    pub fn check(&self) -> Result<(), ToolLimitOutOfRange> {
        ToolLimitKey::ALL
            .into_iter()
            .try_for_each(|key| check(key, self.get(key)))
    }
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self::SHIPPED
    }
}

/// `[tool_limits]`, or a template's `tool_limits = { … }` (snake_case): each key optional,
/// an absent one taken from the level below.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolLimitsConfig {
    /// Tasks (processes and threads) of the tool tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Memory of the tool processes, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Largest file a tool process may write, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_bytes: Option<u64>,
    /// Open file descriptors of one tool process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
}

impl ToolLimitsConfig {
    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The value set for `key`, if any.
    pub const fn get(&self, key: ToolLimitKey) -> Option<u64> {
        match key {
            ToolLimitKey::Processes => self.processes,
            ToolLimitKey::MemoryBytes => self.memory_bytes,
            ToolLimitKey::FileSizeBytes => self.file_size_bytes,
            ToolLimitKey::OpenFiles => self.open_files,
        }
    }

    /// Each key set here, the others from `below`.
    pub fn over(&self, below: ToolLimits) -> ToolLimits {
        ToolLimits {
            processes: self.processes.unwrap_or(below.processes),
            memory_bytes: self.memory_bytes.unwrap_or(below.memory_bytes),
            file_size_bytes: self.file_size_bytes.unwrap_or(below.file_size_bytes),
            open_files: self.open_files.unwrap_or(below.open_files),
        }
    }

    /// The first key set outside its range, if any.
    pub fn check(&self) -> Result<(), ToolLimitOutOfRange> {
        ToolLimitKey::ALL
            .into_iter()
            .try_for_each(|key| match self.get(key) {
                Some(value) => check(key, value),
                None => Ok(()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_limits_are_within_every_range() {
        assert_eq!(ToolLimits::SHIPPED.check(), Ok(()));
        assert_eq!(ToolLimits::SHIPPED.memory_bytes, 4_294_967_296);
        assert_eq!(ToolLimits::SHIPPED.file_size_bytes, 4_294_967_296);
        assert_eq!(ToolLimits::SHIPPED.processes, 4096);
        assert_eq!(ToolLimits::SHIPPED.open_files, 8192);
    }

    #[test]
    fn each_key_resolves_from_the_template_else_the_defaults_else_the_shipped_value() {
        let defaults = ToolLimitsConfig {
            processes: Some(256),
            memory_bytes: Some(GIB),
            ..ToolLimitsConfig::default()
        };
        let template = ToolLimitsConfig {
            memory_bytes: Some(8 * GIB),
            open_files: Some(1024),
            ..ToolLimitsConfig::default()
        };
        let resolved = template.over(defaults.over(ToolLimits::SHIPPED));
        assert_eq!(
            resolved,
            ToolLimits {
                processes: 256,
                memory_bytes: 8 * GIB,
                file_size_bytes: ToolLimits::SHIPPED.file_size_bytes,
                open_files: 1024,
            }
        );
        assert_eq!(
            ToolLimitsConfig::default().over(ToolLimits::SHIPPED),
            ToolLimits::SHIPPED
        );
    }

    #[test]
    fn both_ends_of_every_range_are_accepted_and_one_past_them_refused() {
        for key in ToolLimitKey::ALL {
            let range = key.range();
            for (value, ok) in [
                (*range.start(), true),
                (*range.end(), true),
                (range.start() - 1, false),
                (range.end() + 1, false),
            ] {
                let mut config = ToolLimitsConfig::default();
                match key {
                    ToolLimitKey::Processes => config.processes = Some(value),
                    ToolLimitKey::MemoryBytes => config.memory_bytes = Some(value),
                    ToolLimitKey::FileSizeBytes => config.file_size_bytes = Some(value),
                    ToolLimitKey::OpenFiles => config.open_files = Some(value),
                }
                let checked = config.check();
                assert_eq!(checked.is_ok(), ok, "{key:?} = {value}");
                assert_eq!(config.over(ToolLimits::SHIPPED).check(), checked);
            }
        }
    }

    #[test]
    fn an_out_of_range_value_names_its_key_and_the_range() {
        let zero = ToolLimitsConfig {
            memory_bytes: Some(0),
            ..ToolLimitsConfig::default()
        };
        let err = zero.check().expect_err("zero memory");
        assert_eq!(err.key, ToolLimitKey::MemoryBytes);
        assert_eq!(
            err.to_string(),
            "memory_bytes = 0 is outside 16777216..=1099511627776 (16 MiB..=1 TiB)"
        );
        let many = ToolLimitsConfig {
            processes: Some(1_048_577),
            ..ToolLimitsConfig::default()
        };
        assert_eq!(
            many.check().map_err(|e| e.to_string()),
            Err("processes = 1048577 is outside 1..=1048576".to_owned())
        );
    }

    #[test]
    fn the_frozen_form_is_camel_case_closed_and_complete() {
        let json = serde_json::to_value(ToolLimits::SHIPPED).expect("encodes");
        assert_eq!(
            json,
            serde_json::json!({
                "processes": 4096,
                "memoryBytes": 4_294_967_296_u64,
                "fileSizeBytes": 4_294_967_296_u64,
                "openFiles": 8192,
            })
        );
        let mut unknown = json.clone();
        unknown["cpuSeconds"] = 1.into();
        assert!(serde_json::from_value::<ToolLimits>(unknown).is_err());
        let mut missing = json;
        missing
            .as_object_mut()
            .map(|o| o.remove("openFiles"))
            .expect("object");
        assert!(serde_json::from_value::<ToolLimits>(missing).is_err());
    }

    #[test]
    fn the_config_form_is_snake_case_and_closed() {
        let config: ToolLimitsConfig =
            serde_json::from_str(r#"{"memory_bytes": 1073741824}"#).expect("parses");
        assert_eq!(config.memory_bytes, Some(GIB));
        assert!(serde_json::from_str::<ToolLimitsConfig>(r#"{"memoryBytes": 1}"#).is_err());
        assert!(ToolLimitsConfig::default().is_empty());
        assert!(!config.is_empty());
    }
}
