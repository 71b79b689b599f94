//! Loading the configuration for a broker: one broken entry must not take the server down.
//!
//! Only a file that cannot be read or is not TOML at all stops the start (with the file,
//! line and column). Anything else that [`Config::parse`] would refuse is narrowed down to
//! the smallest entry that carries it — one `[templates.ID]`, one `[credentials.NAME]`, one
//! key of `[limits]`, `[containment]`, `[budgets]` or `[tool_limits]`, one unknown table —
//! which is left out and reported as a [`ConfigProblem`]: the broker serves the rest,
//! `subzero_info` lists each problem, a spawn or a credential that names a broken entry
//! answers with it, and `subzero doctor` shows each with its fix.

use std::path::{Path, PathBuf};

use subzero_core::ErrorCode;
use toml::{Table, Value};

use super::Config;
use crate::error::{RuntimeError, RuntimeResult};

/// One configuration entry left out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The configuration file.
    pub file: PathBuf,
    /// Where in it: `templates.reviewer`, `credentials.openai`, `limits.prompt_bytes`, …
    pub key: String,
    /// What is wrong, as the strict check says it.
    pub reason: String,
    /// The code a call naming the entry is refused with: `invalid_request` for what the
    /// file check refuses (the code a strict load gives), others for what later checks do.
    pub code: ErrorCode,
}

impl ConfigProblem {
    /// One line for logs and error messages: `FILE: KEY: REASON`.
    pub fn describe(&self) -> String {
        format!("{}: {}: {}", self.file.display(), self.key, self.reason)
    }
}

/// A configuration with its broken entries left out.
#[derive(Clone, Debug, Default)]
pub struct LoadedConfig {
    pub config: Config,
    pub problems: Vec<ConfigProblem>,
}

impl LoadedConfig {
    /// The problem of `[templates.ID]`, if that template was left out.
    pub fn template_problem(&self, id: &str) -> Option<&ConfigProblem> {
        let key = format!("templates.{id}");
        self.problems.iter().find(|p| p.key == key)
    }

    /// The problem of `[credentials.NAME]`, if that credential was left out.
    pub fn credential_problem(&self, name: &str) -> Option<&ConfigProblem> {
        let key = format!("credentials.{name}");
        self.problems.iter().find(|p| p.key == key)
    }
}

/// The sections whose entries are whole units: one broken entry leaves out that entry.
const ENTRY_SECTIONS: [&str; 2] = ["templates", "credentials"];

impl Config {
    /// Reads `path` for a broker: a missing file is the empty config; an unreadable file or
    /// one that is not TOML is an error naming the file (and the line and column); every
    /// other problem leaves out the entry that has it (see the module docs).
    pub fn load_lenient(path: &Path) -> RuntimeResult<LoadedConfig> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse_lenient(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LoadedConfig::default()),
            Err(e) => Err(RuntimeError::Config {
                path: path.to_path_buf(),
                message: format!("cannot be read: {e}"),
            }),
        }
    }

    /// [`Config::load_lenient`] of `text` as if read from `path`.
    pub fn parse_lenient(text: &str, path: &Path) -> RuntimeResult<LoadedConfig> {
        if let Ok(config) = Config::parse(text, path) {
            return Ok(LoadedConfig {
                config,
                problems: Vec::new(),
            });
        }
        let doc: Table = text
            .parse()
            .map_err(|e: toml::de::Error| RuntimeError::Config {
                path: path.to_path_buf(),
                message: format!("is not valid TOML: {}", e.to_string().trim_end()),
            })?;
        let mut narrowing = Narrowing {
            path,
            problems: Vec::new(),
        };
        let mut kept = Table::new();
        for (section, value) in doc {
            if let Some(value) = narrowing.section(&section, value) {
                kept.insert(section, value);
            }
        }
        let config = match render(&kept).and_then(|text| Config::parse(&text, path)) {
            Ok(config) => config,
            // Each part passed alone but not together (no such rule exists today): serve
            // nothing of the file rather than something unchecked.
            Err(e) => {
                narrowing.problem("(the whole file)".to_owned(), message(&e));
                Config::default()
            }
        };
        Ok(LoadedConfig {
            config,
            problems: narrowing.problems,
        })
    }
}

struct Narrowing<'a> {
    path: &'a Path,
    problems: Vec<ConfigProblem>,
}

impl Narrowing<'_> {
    /// What of one top-level `section` can be kept.
    fn section(&mut self, section: &str, value: Value) -> Option<Value> {
        if self.accepts(&single(section, value.clone())) {
            return Some(value);
        }
        // A table the file may not have at all (a typo of its name) goes whole.
        let known = self.accepts(&single(section, Value::Table(Table::new())));
        let Value::Table(entries) = value.clone() else {
            self.refuse(section.to_owned(), &single(section, value));
            return None;
        };
        if !known {
            self.refuse(section.to_owned(), &single(section, value));
            return None;
        }
        let mut kept = Table::new();
        for (key, entry) in entries {
            let one = single(section, Value::Table(single(&key, entry.clone())));
            if self.accepts(&one) {
                kept.insert(key, entry);
            } else {
                self.refuse(format!("{section}.{key}"), &one);
            }
        }
        // Keys fine alone may still clash together (a budget default past its maximum).
        let whole = single(section, Value::Table(kept.clone()));
        if !ENTRY_SECTIONS.contains(&section) && !self.accepts(&whole) {
            self.refuse(section.to_owned(), &whole);
            return None;
        }
        Some(Value::Table(kept))
    }

    fn accepts(&self, doc: &Table) -> bool {
        render(doc)
            .and_then(|text| Config::parse(&text, self.path))
            .is_ok()
    }

    fn refuse(&mut self, key: String, doc: &Table) {
        let reason = match render(doc).and_then(|text| Config::parse(&text, self.path)) {
            Ok(_) => "refused together with the rest of its section".to_owned(),
            Err(e) => message(&e),
        };
        self.problem(key, reason);
    }

    fn problem(&mut self, key: String, reason: String) {
        self.problems.push(ConfigProblem {
            file: self.path.to_path_buf(),
            key,
            reason,
            code: ErrorCode::InvalidRequest,
        });
    }
}

fn single(key: &str, value: Value) -> Table {
    let mut table = Table::new();
    table.insert(key.to_owned(), value);
    table
}

fn render(doc: &Table) -> RuntimeResult<String> {
    toml::to_string(doc).map_err(|e| RuntimeError::Internal(format!("cannot re-render TOML: {e}")))
}

/// The reason of a refusal without the file (the problem names it) and without the
/// position in the one-entry document it was checked as (the key names where it is).
fn message(e: &RuntimeError) -> String {
    let text = match e {
        RuntimeError::Config { message, .. } => message.clone(),
        other => other.to_string(),
    };
    if text.starts_with("TOML parse error at line") {
        // "TOML parse error at line L, column C\n  |\n…\n<message>": the message is last.
        if let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) {
            return last.trim().to_owned();
        }
    }
    text
}
