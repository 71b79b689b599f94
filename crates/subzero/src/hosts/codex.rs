//! Codex: `[mcp_servers.subzero]` in `config.toml`, edited with `toml_edit` so comments,
//! ordering and every other table keep their bytes.
//!
//! Files: user scope `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`); project scope
//! `<workspace>/.codex/config.toml`, which Codex reads only for trusted projects.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, InlineTable, Item, Table, TableLike, Value};

use super::{Field, HostEnv, HostsError, Launch, SERVER_NAME, Scope};

/// Codex's own default is 10 s; the broker opens its SQLite store before answering.
pub(super) const STARTUP_TIMEOUT_SEC: i64 = 20;
/// Twice the longest wait a Subzero tool makes (`subzero_get`/`subzero_stop` `waitMs` ≤ 30 000).
pub(super) const TOOL_TIMEOUT_SEC: i64 = 60;

pub(super) const VERIFY: &str = "verify: start `codex` in the workspace and run `/mcp`; `subzero` \
     should be listed with its tools (a project `.codex/config.toml` is read only once the \
     project is trusted).";

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

fn fields(launch: &Launch) -> Vec<(&'static str, Field)> {
    vec![
        ("command", Field::Str(launch.command.clone())),
        ("args", Field::Strings(launch.args.clone())),
        ("startup_timeout_sec", Field::Int(STARTUP_TIMEOUT_SEC)),
        ("tool_timeout_sec", Field::Int(TOOL_TIMEOUT_SEC)),
    ]
}

pub(super) fn merge(
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
) -> Result<String, HostsError> {
    let text = original.unwrap_or("");
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|err: toml_edit::TomlError| HostsError::InvalidToml {
                path: path.to_path_buf(),
                message: err.to_string().trim().to_owned(),
            })?;
    let fields = fields(launch);
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
    if !force {
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
mod tests {
    use super::super::testkit::{Kit, assert_no_backup, backups, changed_lines};
    use super::super::{Host, Scope};
    use super::*;

    const EXISTING: &str = r#"# Codex settings, kept by hand.
model = "gpt-5.3-codex"
approval_policy = "on-request"   # ask before running commands

[projects."/home/me/src/app"]
trust_level = "trusted"

# Docs lookups.
[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]
startup_timeout_sec = 30

[mcp_servers.context7.env]
CONTEXT7_API_KEY = "env:CONTEXT7"   # resolved by the server

[profiles.fast]
model = "gpt-5.3-codex-mini"
"#;

    fn parse(text: &str) -> DocumentMut {
        text.parse().expect("valid TOML")
    }

    #[test]
    fn install_keeps_comments_and_every_other_table_byte_for_byte() {
        let kit = Kit::new();
        let path = kit.write(".codex/config.toml", EXISTING);
        let out = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        let updated = kit.read(&path);
        let (removed, added) = changed_lines(EXISTING, &updated);
        assert!(removed.is_empty(), "no existing line changed: {removed:?}");
        assert_eq!(
            added.len(),
            6,
            "a blank line, the header and four keys: {added:?}"
        );
        assert!(
            added.contains(&"[mcp_servers.subzero]".to_owned()),
            "{added:?}"
        );
        let doc = parse(&updated);
        let entry = &doc["mcp_servers"]["subzero"];
        assert_eq!(
            entry["command"].as_str(),
            Some(super::super::testkit::BINARY)
        );
        let args: Vec<_> = entry["args"]
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(args, ["mcp", "--workspace", kit.workspace_str().as_str()]);
        assert_eq!(entry["tool_timeout_sec"].as_integer(), Some(60));
        assert_eq!(entry["startup_timeout_sec"].as_integer(), Some(20));
        assert_eq!(
            doc["mcp_servers"]["context7"]["command"].as_str(),
            Some("npx")
        );
        assert_eq!(backups(&path).len(), 1);
        assert_eq!(kit.read(&backups(&path)[0]), EXISTING);
        assert!(out.contains("updated"), "{out}");
    }

    #[test]
    fn running_install_twice_changes_nothing_the_second_time() {
        let kit = Kit::new();
        let path = kit.write(".codex/config.toml", EXISTING);
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("first");
        let after_first = kit.read(&path);
        let out = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect("second");
        assert_eq!(kit.read(&path), after_first);
        assert_eq!(backups(&path).len(), 1, "no backup for a no-op");
        assert!(out.contains("already installed"), "{out}");
    }

    #[test]
    fn dry_run_prints_the_diff_and_writes_nothing() {
        let kit = Kit::new();
        let path = kit.write(".codex/config.toml", EXISTING);
        let out = kit
            .install(Host::Codex, Scope::Project, &["--dry-run"])
            .expect("dry run");
        assert_eq!(kit.read(&path), EXISTING);
        assert_no_backup(&path);
        assert!(out.contains("+[mcp_servers.subzero]"), "{out}");
        assert!(out.contains("+tool_timeout_sec = 60"), "{out}");
        assert!(out.contains("nothing written"), "{out}");
    }

    #[test]
    fn a_different_subzero_entry_is_refused_without_force() {
        let kit = Kit::new();
        let existing = format!(
            "{EXISTING}\n[mcp_servers.subzero]\ncommand = \"/old/subzero\" # pinned\nargs = [\"mcp\"]\nenv = {{ RUST_LOG = \"debug\" }}\n"
        );
        let path = kit.write(".codex/config.toml", &existing);
        let err = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_conflicting_entry");
        assert!(err.to_string().contains("--force"), "{err}");
        assert!(err.to_string().contains("/old/subzero"), "{err}");
        assert_eq!(kit.read(&path), existing);
        assert_no_backup(&path);

        kit.install(Host::Codex, Scope::Project, &["--force"])
            .expect("forced");
        let updated = kit.read(&path);
        let doc = parse(&updated);
        let entry = &doc["mcp_servers"]["subzero"];
        assert_eq!(
            entry["command"].as_str(),
            Some(super::super::testkit::BINARY)
        );
        assert_eq!(
            entry["env"]["RUST_LOG"].as_str(),
            Some("debug"),
            "user field kept"
        );
        assert!(
            updated.starts_with(EXISTING),
            "the rest of the file is untouched"
        );
        assert_eq!(backups(&path).len(), 1);
    }

    #[test]
    fn a_missing_file_is_created_with_its_directory_and_no_backup() {
        let kit = Kit::new();
        let out = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        let path = kit.workspace.join(".codex/config.toml");
        let text = kit.read(&path);
        assert!(text.starts_with("[mcp_servers.subzero]\n"), "{text}");
        assert!(!text.contains("[mcp_servers]\n"), "no empty parent header");
        assert_no_backup(&path);
        assert!(out.contains("created"), "{out}");
    }

    #[test]
    fn user_scope_honours_codex_home() {
        let mut kit = Kit::new();
        let codex_home = kit.home.join("custom-codex");
        kit.env.codex_home = Some(codex_home.clone());
        kit.install(Host::Codex, Scope::User, &[])
            .expect("installs");
        let doc = parse(&kit.read(&codex_home.join("config.toml")));
        let args = doc["mcp_servers"]["subzero"]["args"]
            .as_array()
            .expect("args");
        assert_eq!(args.len(), 1, "user scope writes no --workspace: {args}");
    }

    #[test]
    fn an_inline_mcp_servers_table_gets_an_inline_entry() {
        let kit = Kit::new();
        let existing = "mcp_servers = { other = { command = \"x\" } }\n";
        let path = kit.write(".codex/config.toml", existing);
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        let doc = parse(&kit.read(&path));
        assert_eq!(doc["mcp_servers"]["other"]["command"].as_str(), Some("x"));
        assert_eq!(
            doc["mcp_servers"]["subzero"]["tool_timeout_sec"].as_integer(),
            Some(60)
        );
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("second run");
        assert_eq!(backups(&path).len(), 1);
    }

    #[test]
    fn a_float_timeout_equal_to_ours_is_not_a_conflict() {
        let kit = Kit::new();
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        let path = kit.workspace.join(".codex/config.toml");
        let text = kit
            .read(&path)
            .replace("tool_timeout_sec = 60", "tool_timeout_sec = 60.0");
        kit.write(".codex/config.toml", &text);
        let out = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect("no conflict");
        assert!(out.contains("already installed"), "{out}");
    }

    #[test]
    fn invalid_toml_is_refused_and_left_alone() {
        let kit = Kit::new();
        let path = kit.write(".codex/config.toml", "model = \n");
        let err = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_invalid_toml");
        assert_eq!(kit.read(&path), "model = \n");
    }

    #[test]
    fn print_shows_the_same_table_install_writes() {
        let kit = Kit::new();
        let printed = kit.print(Host::Codex, Scope::Project, &[]).expect("prints");
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        assert_eq!(printed, kit.read(&kit.workspace.join(".codex/config.toml")));
    }
}
