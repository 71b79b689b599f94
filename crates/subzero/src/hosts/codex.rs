//! Codex: `[mcp_servers.subzero]` in `config.toml`, edited with `toml_edit` so comments,
//! ordering and every other table keep their bytes.
//!
//! Files: user scope `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`); project scope
//! `<workspace>/.codex/config.toml`, which Codex reads only for trusted projects
//! (`[projects."<dir>"] trust_level = "trusted"` in the user file; `--trust` writes it).
//!
//! Codex starts a stdio server with a fixed few variables (HOME, PATH, LANG, SHELL, TERM, …)
//! plus the names in its `env_vars`; everything else is dropped. So the entry lists every
//! variable the Subzero config reads a credential from (`[credentials.*] env = "VAR"`) and the
//! `SUBZERO_*` variables in use, and it passes `--state-dir` / `--config` explicitly when the
//! installer's environment (`SUBZERO_STATE_DIR`, `SUBZERO_CONFIG`, `XDG_*`) resolves them
//! elsewhere than HOME alone would.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, InlineTable, Item, Table, TableLike, Value};

use super::{Field, HostEnv, HostsError, Launch, SERVER_NAME, Scope};

mod entry;
mod trust;

use entry::{CodexEntry, entry};
pub(super) use trust::trust_edit;
use trust::trust_step;

/// Codex's own default is 10 s; the broker opens its SQLite store before answering.
pub(super) const STARTUP_TIMEOUT_SEC: i64 = 20;
/// Twice the longest wait a Subzero tool makes (`subzero_get`/`subzero_stop` `waitMs` ≤ 30 000).
pub(super) const TOOL_TIMEOUT_SEC: i64 = 60;

/// What Codex still needs: the project trust (project scope), where the credentials come from,
/// and how to check the entry.
pub(super) fn next_steps(
    scope: Scope,
    project_dir: &Path,
    launch: &Launch,
    env: &HostEnv,
) -> String {
    let entry = entry(launch, env);
    let mut lines = Vec::new();
    if scope == Scope::Project {
        lines.push(trust_step(project_dir, env));
    }
    let config = entry.subzero_config.display();
    if !entry.subzero_config.exists() {
        lines.push(format!(
            "credentials: there is no Subzero config at {config} yet; Codex passes the broker \
             only the variables in `env_vars`, so once you add `[credentials.<name>] env = \
             \"VAR\"` run install again (it adds VAR), or use `file = \"/path/to/key\"`."
        ));
    } else if entry.credential_vars.is_empty() {
        lines.push(format!(
            "credentials: {config} reads no key from the environment; Codex would not pass one \
             anyway unless it is in `env_vars`."
        ));
    } else {
        lines.push(format!(
            "credentials: {config} reads {} from the environment; Codex passes them to the \
             broker only because `env_vars` names them, so set them in the shell that starts \
             `codex` (or switch to `file = \"/path/to/key\"`). After adding a credential, run \
             install again.",
            entry.credential_vars.join(", ")
        ));
    }
    lines.push(
        "verify: run `codex mcp list` in the workspace: `subzero` should be listed, `enabled`; \
         the model sees its tools in the namespace `mcp__subzero` (`mcp__subzero__subzero_spawn` \
         … `mcp__subzero__subzero_info`)."
            .to_owned(),
    );
    lines.join("\n")
}

pub(super) fn config_path(
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<PathBuf, HostsError> {
    Ok(match scope {
        Scope::Project => project_dir.join(".codex").join("config.toml"),
        Scope::User => match &env.codex_home {
            Some(dir) => dir.join("config.toml"),
            None => env.home()?.join(".codex").join("config.toml"),
        },
    })
}

fn fields(entry: &CodexEntry, env_vars: Vec<String>) -> Vec<(&'static str, Field)> {
    vec![
        ("command", Field::Str(entry.launch.command.clone())),
        ("args", Field::Strings(entry.launch.args.clone())),
        ("env_vars", Field::Strings(env_vars)),
        ("startup_timeout_sec", Field::Int(STARTUP_TIMEOUT_SEC)),
        ("tool_timeout_sec", Field::Int(TOOL_TIMEOUT_SEC)),
    ]
}

/// `env_vars` to write: the existing list when it already names every variable we need (the
/// user's own additions stay), else the existing list with the missing ones appended.
fn merged_env_vars(doc: &DocumentMut, wanted: &[String]) -> Vec<String> {
    let existing: Vec<String> = doc
        .get("mcp_servers")
        .and_then(|s| s.get(SERVER_NAME))
        .and_then(|e| e.get("env_vars"))
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut vars = existing;
    for var in wanted {
        if !vars.contains(var) {
            vars.push(var.clone());
        }
    }
    vars
}

pub(super) fn merge(
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
    env: &HostEnv,
) -> Result<String, HostsError> {
    let text = original.unwrap_or("");
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|err: toml_edit::TomlError| HostsError::InvalidToml {
                path: path.to_path_buf(),
                message: err.to_string().trim().to_owned(),
            })?;
    let entry = entry(launch, env);
    let env_vars = merged_env_vars(&doc, &entry.env_vars);
    let fields = fields(&entry, env_vars);
    let separate = !text.trim().is_empty();
    let changed = upsert(path, &mut doc, &fields, force, separate)?;
    Ok(if changed {
        doc.to_string()
    } else {
        text.to_owned()
    })
}

fn upsert(
    path: &Path,
    doc: &mut DocumentMut,
    fields: &[(&'static str, Field)],
    force: bool,
    separate: bool,
) -> Result<bool, HostsError> {
    let root = doc.as_table_mut();
    if !root.contains_key("mcp_servers") {
        let mut servers = Table::new();
        // No empty `[mcp_servers]` header: only `[mcp_servers.subzero]` appears.
        servers.set_implicit(true);
        root.insert("mcp_servers", Item::Table(servers));
    }
    let shape_err = |found| HostsError::UnexpectedShape {
        path: path.to_path_buf(),
        key: "mcp_servers".to_owned(),
        found,
        expected: "a table",
    };
    match root.get_mut("mcp_servers") {
        Some(Item::Table(servers)) => {
            if !servers.contains_key(SERVER_NAME) {
                let mut entry = Table::new();
                fill(&mut entry, fields);
                if separate {
                    entry.decor_mut().set_prefix("\n");
                }
                servers.insert(SERVER_NAME, Item::Table(entry));
                return Ok(true);
            }
            update(path, servers, fields, force)
        }
        Some(Item::Value(Value::InlineTable(servers))) => {
            if !servers.contains_key(SERVER_NAME) {
                let mut entry = InlineTable::new();
                fill(&mut entry, fields);
                servers.insert(SERVER_NAME, Value::InlineTable(entry));
                return Ok(true);
            }
            update(path, servers, fields, force)
        }
        Some(Item::ArrayOfTables(_)) => Err(shape_err("an array of tables")),
        Some(Item::Value(_)) => Err(shape_err("a value")),
        Some(Item::None) | None => Err(shape_err("missing")),
    }
}

/// Checks an existing `subzero` entry; with `force`, rewrites the managed fields that differ.
fn update(
    path: &Path,
    servers: &mut dyn TableLike,
    fields: &[(&'static str, Field)],
    force: bool,
) -> Result<bool, HostsError> {
    let wanted = || {
        let mut table = Table::new();
        fill(&mut table, fields);
        render_entry(&Item::Table(table))
    };
    let existing = servers.get_mut(SERVER_NAME);
    let Some(entry) = existing.and_then(|item| item.as_table_like_mut()) else {
        let shown = servers
            .get(SERVER_NAME)
            .map(render_entry)
            .unwrap_or_default();
        return Err(HostsError::ConflictingEntry {
            path: path.to_path_buf(),
            existing: shown,
            wanted: wanted(),
        });
    };
    let stale: Vec<_> = fields
        .iter()
        .filter(|(key, field)| !matches(field, entry.get(key)))
        .collect();
    if stale.is_empty() {
        return Ok(false);
    }
    // `env_vars` only ever grows (the wanted list starts from the existing one): no conflict.
    let only_growth = stale.iter().all(|(key, _)| *key == "env_vars");
    if !force && !only_growth {
        let shown = servers
            .get(SERVER_NAME)
            .map(render_entry)
            .unwrap_or_default();
        return Err(HostsError::ConflictingEntry {
            path: path.to_path_buf(),
            existing: shown,
            wanted: wanted(),
        });
    }
    for (key, field) in stale {
        entry.insert(key, Item::Value(to_toml(field)));
    }
    Ok(true)
}

/// Anything that takes `key = value` pairs in order: a `[table]` or an inline `{ … }`.
trait Fill {
    fn put(&mut self, key: &str, value: Value);
}

impl Fill for Table {
    fn put(&mut self, key: &str, value: Value) {
        self.insert(key, Item::Value(value));
    }
}

impl Fill for InlineTable {
    fn put(&mut self, key: &str, value: Value) {
        self.insert(key, value);
    }
}

fn fill(target: &mut impl Fill, fields: &[(&'static str, Field)]) {
    for (key, field) in fields {
        target.put(key, to_toml(field));
    }
}

fn to_toml(field: &Field) -> Value {
    match field {
        Field::Str(s) => Value::from(s.as_str()),
        Field::Strings(items) => Value::Array(items.iter().map(String::as_str).collect()),
        Field::Int(n) => Value::from(*n),
        Field::Bool(b) => Value::from(*b),
        Field::ObjectPresent => Value::InlineTable(InlineTable::new()),
    }
}

fn matches(field: &Field, item: Option<&Item>) -> bool {
    let Some(item) = item else {
        return false;
    };
    match field {
        Field::Str(want) => item.as_str() == Some(want.as_str()),
        Field::Strings(want) => item.as_array().is_some_and(|have| {
            have.len() == want.len()
                && have
                    .iter()
                    .zip(want)
                    .all(|(h, w)| h.as_str() == Some(w.as_str()))
        }),
        Field::Int(want) => {
            item.as_integer() == Some(*want) || item.as_float().is_some_and(|f| f == *want as f64)
        }
        Field::Bool(want) => item.as_bool() == Some(*want),
        Field::ObjectPresent => item.is_table_like(),
    }
}

/// An entry as it would read in its own `[mcp_servers.subzero]` table, for error messages.
fn render_entry(item: &Item) -> String {
    let mut doc = DocumentMut::new();
    let mut servers = Table::new();
    servers.set_implicit(true);
    let entry = match item {
        Item::Value(Value::InlineTable(inline)) => Item::Table(inline.clone().into_table()),
        other => other.clone(),
    };
    servers.insert(SERVER_NAME, entry);
    doc.insert("mcp_servers", Item::Table(servers));
    doc.to_string().trim().to_owned()
}

#[cfg(test)]
mod tests;
