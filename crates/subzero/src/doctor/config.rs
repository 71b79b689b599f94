//! The configuration file and every configured credential reference.

use std::path::Path;

use subzero_core::Described;
use subzero_runtime::config::Config;
use subzero_runtime::credentials::CredentialResolver;

use super::report::Check;

/// Each entry a broker would leave out of the configuration, with how to fix it.
pub fn check_config_entries(path: &Path) -> Vec<Check> {
    let Ok(loaded) = Config::load_lenient(path) else {
        // Reported by `check_config`: the file itself cannot be used.
        return Vec::new();
    };
    loaded
        .problems
        .iter()
        .map(|problem| {
            Check::warn(
                format!("config entry {}", problem.key),
                format!(
                    "{}: {} — a broker leaves this entry out and serves the rest",
                    path.display(),
                    problem.reason
                ),
                format!(
                    "edit [{}] in {} (TOML, snake_case keys; see docs/protocol.md, \"Configuration file\") and restart the MCP server",
                    problem.key,
                    path.display()
                ),
            )
        })
        .collect()
}

/// Load and validate the configuration file; `None` when it cannot be used. A file with
/// broken entries is usable (a broker serves the rest): the config then holds what is
/// left, and [`check_config_entries`] names each broken entry.
pub fn check_config(path: &Path) -> (Check, Option<Config>) {
    let shown = path.display();
    let loaded = Config::load_lenient(path).and_then(|loaded| {
        CredentialResolver::new(&loaded.config, path)?;
        Ok(loaded)
    });
    let loaded = match loaded {
        Ok(l) if !l.problems.is_empty() => {
            let count = l.problems.len();
            return (
                Check::warn(
                    "config",
                    format!(
                        "{shown}: {count} broken entr{} left out (each below); {} credential(s), {} user template(s) served",
                        if count == 1 { "y" } else { "ies" },
                        l.config.credentials.len(),
                        l.config.templates.len()
                    ),
                    format!("fix the entries named below in {shown}"),
                ),
                Some(l.config),
            );
        }
        other => other.map(|l| l.config),
    };
    match loaded {
        Ok(config) if !path.exists() => (
            Check::warn(
                "config",
                format!(
                    "{shown} does not exist: no credentials and no user templates are configured"
                ),
                format!(
                    "create {shown} with a [credentials.NAME] table (env = \"VAR\" or file = \"path\", origins = [\"https://host:443\"]) — see docs/protocol.md, \"Configuration file\""
                ),
            ),
            Some(config),
        ),
        Ok(config) => (
            Check::pass(
                "config",
                format!(
                    "{shown}: {} credential(s), {} user template(s)",
                    config.credentials.len(),
                    config.templates.len()
                ),
            ),
            Some(config),
        ),
        Err(e) => {
            // An invalid file says what is wrong without its code; anything else keeps it.
            let message = match e.code() {
                subzero_core::ErrorCode::InvalidRequest => e.message(),
                _ => e.to_string(),
            };
            (
                Check::fail(
                    "config",
                    message,
                    format!(
                        "edit {shown} at the place named above (TOML, snake_case keys; see docs/protocol.md, \"Configuration file\"), or point --config / SUBZERO_CONFIG at a valid file"
                    ),
                ),
                None,
            )
        }
    }
}

/// Whether each credential resolves for each of its origins. Reads each key into
/// memory and drops it at once; never prints it.
pub fn check_credentials(config: &Config, path: &Path) -> Vec<Check> {
    let resolver = match CredentialResolver::new(config, path) {
        Ok(r) => r,
        // Already reported by `check_config`.
        Err(_) => return Vec::new(),
    };
    let mut checks = Vec::new();
    for (name, entry) in &config.credentials {
        let source = match (&entry.env, &entry.file) {
            (Some(var), _) => format!("environment variable {var}"),
            (_, Some(file)) => format!("file {}", file.display()),
            _ => "nothing".to_owned(),
        };
        for origin in &entry.origins {
            let label = format!("credential {name} @ {origin}");
            match resolver.resolve(name, origin) {
                Ok(key) => {
                    drop(key);
                    checks.push(Check::pass(label, format!("resolvable from {source}")));
                }
                Err(e) => {
                    let message = e.message();
                    let fix = match (&entry.env, &entry.file) {
                        (Some(var), _) => format!(
                            "export {var}=<key> in the environment the host starts `subzero mcp` from (doctor checks its own environment), or use file = \"path\" in [credentials.{name}]"
                        ),
                        (_, Some(file)) => format!(
                            "put only the key in {} (chmod 600), or fix file = in [credentials.{name}] of {}",
                            file.display(),
                            path.display()
                        ),
                        _ => format!(
                            "set env or file in [credentials.{name}] of {}",
                            path.display()
                        ),
                    };
                    checks.push(Check::fail(label, message, fix));
                }
            }
        }
    }
    checks
}
