//! Secrets the broker reads from its environment, captured once and then held in memory only.
//!
//! A credential's `env = "VAR"` and a user template's MCP `env = { NAME = "env:VAR" }` name
//! variables whose values are secrets. Any process of the same OS user may read
//! `/proc/<broker pid>/environ`, which shows the environment block the broker was started
//! with, so `subzero mcp` captures these values before it starts any thread and scrubs them
//! from its environment ([`SecretEnv::capture_and_scrub`]). From then on the broker reads them
//! only from the captured [`SecretEnv`], never from its live environment.

mod scrub;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

use crate::config::Config;

pub use scrub::ScrubError;

/// Values of the environment variables a configuration names as secrets, each a
/// [`SecretString`]. Cheap to clone (the values are shared, not copied); `Debug` shows
/// the names only and nothing here serializes.
#[derive(Clone, Default)]
pub struct SecretEnv {
    values: Arc<BTreeMap<String, SecretString>>,
}

impl fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretEnv")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl SecretEnv {
    /// The variables `config` reads secrets from: every `[credentials.*] env` and every
    /// `env:VAR` reference of a user template's MCP servers. Names no environment can hold
    /// (empty, or containing `=` or NUL) are left out; they resolve as unset.
    pub fn names(config: &Config) -> BTreeSet<String> {
        let credentials = config.credentials.values().filter_map(|c| c.env.clone());
        let mcp_refs = config
            .templates
            .values()
            .flat_map(|t| &t.mcp_servers)
            .flat_map(|s| s.env.values())
            .map(|reference| {
                reference
                    .strip_prefix("env:")
                    .unwrap_or(reference)
                    .to_owned()
            });
        credentials
            .chain(mcp_refs)
            .filter(|name| !name.is_empty() && !name.contains(['=', '\0']))
            .collect()
    }

    /// Copy the variables `config` names from this process's environment and leave the
    /// environment as it is: for embedders, whose process environment is not theirs to
    /// change. Values that are not UTF-8 are left out (they resolve as unset).
    pub fn capture(config: &Config) -> SecretEnv {
        let values = SecretEnv::names(config)
            .into_iter()
            .filter_map(|name| {
                let value = std::env::var_os(&name)?.into_string().ok()?;
                Some((name, SecretString::from(value)))
            })
            .collect();
        SecretEnv::from_values(values)
    }

    /// Capture like [`SecretEnv::capture`], then remove every named variable from this
    /// process's environment and overwrite its value in the environment block the process
    /// was started with, so `/proc/<pid>/environ` no longer shows it.
    ///
    /// Only a single-threaded process may change its environment, so this refuses when
    /// any other thread runs; call it before building an async runtime or starting a
    /// thread. On `Err` nothing was captured or changed.
    pub fn capture_and_scrub(config: &Config) -> Result<SecretEnv, ScrubError> {
        let names = SecretEnv::names(config);
        scrub::capture_and_scrub(&names).map(SecretEnv::from_values)
    }

    /// Explicit values (tests, or an embedder that gets its secrets elsewhere).
    pub fn from_values(values: BTreeMap<String, SecretString>) -> SecretEnv {
        SecretEnv {
            values: Arc::new(values),
        }
    }

    /// The captured value of `name`, if it was set.
    pub fn get(&self, name: &str) -> Option<&SecretString> {
        self.values.get(name)
    }

    /// Whether `name` was captured with a non-empty value.
    pub fn is_set(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|value| !value.expose_secret().is_empty())
    }
    /// `text` with every captured value (a model key, an MCP server's secret) replaced by
    /// `[redacted]`, longest first, so no part of one survives.
    pub fn redact(&self, text: &str) -> String {
        let mut values: Vec<&str> = self
            .values
            .values()
            .map(|v| v.expose_secret())
            .filter(|v| !v.is_empty())
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.into_iter().fold(text.to_owned(), |text, secret| {
            text.replace(secret, "[redacted]")
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, Path::new("/etc/subzero/config.toml")).expect("config parses")
    }

    #[test]
    fn names_are_the_credential_variables_and_the_mcp_env_references() {
        let config = config(
            r#"
[credentials.openai]
env = "OPENAI_API_KEY"
origins = ["https://api.openai.com:443"]

[credentials.local]
file = "key.txt"
origins = ["http://127.0.0.1:8080"]

[templates.gh]
description = "GitHub helper"
instructions = "Answer questions about issues."
tools = ["read"]

[[templates.gh.mcp_servers]]
name = "github"
command = "github-mcp"
env = { GITHUB_TOKEN = "env:GH_TOKEN" }
allowed_tools = ["search"]
"#,
        );
        let names: Vec<String> = SecretEnv::names(&config).into_iter().collect();
        assert_eq!(names, ["GH_TOKEN", "OPENAI_API_KEY"]);
    }

    #[test]
    fn debug_shows_names_and_never_values() {
        let secrets = SecretEnv::from_values(BTreeMap::from([(
            "SOME_KEY".to_owned(),
            SecretString::from("sk-do-not-print-me"),
        )]));
        let shown = format!("{secrets:?}");
        assert!(shown.contains("SOME_KEY"), "{shown}");
        assert!(!shown.contains("sk-do-not-print-me"), "{shown}");
        assert!(secrets.is_set("SOME_KEY"));
        assert!(!secrets.is_set("OTHER"));
    }

    #[test]
    fn scrubbing_refuses_in_a_multi_threaded_process_and_changes_nothing() {
        // The test harness runs tests on threads; keep one more alive to be sure.
        let (stop, parked) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || parked.recv().ok());
        let config = config(
            "[credentials.c]\nenv = \"SUBZERO_SCRUB_TEST_UNSET\"\norigins = [\"https://example.com:443\"]\n",
        );
        let refused = SecretEnv::capture_and_scrub(&config);
        assert!(
            matches!(refused, Err(ScrubError::NotSingleThreaded { .. })),
            "{refused:?}"
        );
        drop(stop);
        let _ = other.join();
    }
}
