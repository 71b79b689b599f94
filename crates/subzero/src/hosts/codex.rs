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

use subzero_runtime::paths::{PathEnv, resolve_config_path, resolve_state_dir};

use super::{ExtraEdit, Field, HostEnv, HostsError, Launch, SERVER_NAME, Scope, edit};

/// Codex's own default is 10 s; the broker opens its SQLite store before answering.
pub(super) const STARTUP_TIMEOUT_SEC: i64 = 20;
/// Twice the longest wait a Subzero tool makes (`subzero_get`/`subzero_stop` `waitMs` ≤ 30 000).
pub(super) const TOOL_TIMEOUT_SEC: i64 = 60;

/// Variables passed through even when unset at install time (Codex skips unset ones).
const ALWAYS_PASSED: &[&str] = &["SUBZERO_LOG"];

/// The broker's paths and variables as Codex will start it.
#[derive(Debug, Clone, PartialEq)]
struct CodexEntry {
    launch: Launch,
    /// The Subzero config file the broker will read.
    subzero_config: PathBuf,
    /// Variables named in `[credentials.*] env`, in file order.
    credential_vars: Vec<String>,
    /// `credential_vars` then the `SUBZERO_*` variables to pass through.
    env_vars: Vec<String>,
}

/// The installer's view of the paths (everything set) and Codex's (HOME alone).
fn path_envs(env: &HostEnv) -> (PathEnv, PathEnv) {
    let var = |name: &str| {
        env.subzero_vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let home = env.home.clone().map(PathBuf::into_os_string);
    let shell = PathEnv {
        subzero_state_dir: var("SUBZERO_STATE_DIR"),
        subzero_config: var("SUBZERO_CONFIG"),
        xdg_state_home: env.xdg_state_home.clone().map(PathBuf::into_os_string),
        xdg_config_home: env.xdg_config_home.clone().map(PathBuf::into_os_string),
        home: home.clone(),
    };
    let codex = PathEnv {
        home,
        ..PathEnv::default()
    };
    (shell, codex)
}

fn entry(launch: &Launch, env: &HostEnv) -> CodexEntry {
    let mut launch = launch.clone();
    let (shell, codex) = path_envs(env);
    let given = launch
        .args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| launch.args.get(i + 1))
        .map(PathBuf::from);
    let subzero_config = match given {
        Some(file) => file,
        None => {
            let mine = resolve_config_path(None, &shell).ok();
            if let Some(file) = &mine
                && mine != resolve_config_path(None, &codex).ok()
            {
                launch.args.push("--config".to_owned());
                launch.args.push(file.to_string_lossy().into_owned());
            }
            mine.unwrap_or_default()
        }
    };
    let state = resolve_state_dir(None, &shell).ok();
    if let Some(dir) = &state
        && state != resolve_state_dir(None, &codex).ok()
    {
        launch.args.push("--state-dir".to_owned());
        launch.args.push(dir.to_string_lossy().into_owned());
    }
    let credential_vars = credential_vars(&subzero_config);
    let mut env_vars = credential_vars.clone();
    let mut passed: Vec<String> = env
        .subzero_vars
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| k != "SUBZERO_STATE_DIR" && k != "SUBZERO_CONFIG")
        .chain(ALWAYS_PASSED.iter().map(|v| (*v).to_owned()))
        .collect();
    passed.sort();
    for var in passed {
        if !env_vars.contains(&var) {
            env_vars.push(var);
        }
    }
    CodexEntry {
        launch,
        subzero_config,
        credential_vars,
        env_vars,
    }
}

/// The `env = "VAR"` names of `[credentials.*]` in the Subzero config (none when the file is
/// missing or unreadable: `subzero doctor` reports that, not `hosts install`).
fn credential_vars(file: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let Ok(doc) = text.parse::<DocumentMut>() else {
        return Vec::new();
    };
    let mut vars: Vec<String> = Vec::new();
    if let Some(credentials) = doc.get("credentials").and_then(Item::as_table_like) {
        for (_, credential) in credentials.iter() {
            let var = credential
                .as_table_like()
                .and_then(|c| c.get("env"))
                .and_then(Item::as_str);
            if let Some(var) = var
                && !vars.iter().any(|v| v == var)
            {
                vars.push(var.to_owned());
            }
        }
    }
    vars
}

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

/// The user file (where Codex keeps project trust).
fn user_config(env: &HostEnv) -> Result<PathBuf, HostsError> {
    config_path(Scope::User, Path::new(""), env)
}

fn trust_step(project_dir: &Path, env: &HostEnv) -> String {
    let dir = project_dir.display();
    let Ok(file) = user_config(env) else {
        return format!(
            "trust: Codex reads {dir}/.codex/config.toml only for a trusted project: start \
             `codex` there once and trust it, or run install again with --trust."
        );
    };
    let trusted = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| t.parse::<DocumentMut>().ok())
        .is_some_and(|doc| trust_level(&doc, project_dir) == Some("trusted"));
    if trusted {
        return format!(
            "trust: {dir} is trusted in {}, so Codex reads its .codex/config.toml.",
            file.display()
        );
    }
    format!(
        "trust: Codex ignores {dir}/.codex/config.toml, silently, until the project is trusted: \
         start `codex` there once and trust it, or run install again with --trust (adds \
         [projects.\"{dir}\"] trust_level = \"trusted\" to {}).",
        file.display()
    )
}

fn trust_level<'d>(doc: &'d DocumentMut, project_dir: &Path) -> Option<&'d str> {
    doc.get("projects")?
        .as_table_like()?
        .get(&project_dir.to_string_lossy())?
        .as_table_like()?
        .get("trust_level")?
        .as_str()
}

/// `--trust`: `[projects."<dir>"] trust_level = "trusted"` in the user's Codex config.
pub(super) fn trust_edit(project_dir: &Path, env: &HostEnv) -> Result<ExtraEdit, HostsError> {
    let path = edit::resolve_symlink(&user_config(env)?);
    let original = edit::read_optional(&path)?;
    let text = original.as_deref().unwrap_or("");
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|err: toml_edit::TomlError| HostsError::InvalidToml {
                path: path.clone(),
                message: err.to_string().trim().to_owned(),
            })?;
    let dir = project_dir.to_string_lossy().into_owned();
    let updated = if trust_level(&doc, project_dir) == Some("trusted") {
        text.to_owned()
    } else {
        let root = doc.as_table_mut();
        if !root.contains_key("projects") {
            let mut projects = Table::new();
            projects.set_implicit(true);
            root.insert("projects", Item::Table(projects));
        }
        let shape_err = |key: String, found| HostsError::UnexpectedShape {
            path: path.clone(),
            key,
            found,
            expected: "a table",
        };
        let projects = root
            .get_mut("projects")
            .and_then(Item::as_table_like_mut)
            .ok_or_else(|| shape_err("projects".to_owned(), "not a table"))?;
        if projects.get(&dir).is_none() {
            let mut project = Table::new();
            if !text.trim().is_empty() {
                project.decor_mut().set_prefix("\n");
            }
            projects.insert(&dir, Item::Table(project));
        }
        let project = projects
            .get_mut(&dir)
            .and_then(Item::as_table_like_mut)
            .ok_or_else(|| shape_err(format!("projects.\"{dir}\""), "not a table"))?;
        project.insert("trust_level", Item::Value(Value::from("trusted")));
        doc.to_string()
    };
    Ok(ExtraEdit {
        path,
        original,
        updated,
        what: format!("{dir} is trusted, so Codex reads its .codex/config.toml"),
    })
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
mod tests {
    use super::super::testkit::{Kit, assert_no_backup, backups, changed_lines};
    use super::super::{Host, InstallArgs, Scope};
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
            7,
            "a blank line, the header and five keys: {added:?}"
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

    fn strings(item: &Item) -> Vec<String> {
        item.as_array()
            .expect("array")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    fn with_config(kit: &Kit, config: &str) -> InstallArgs {
        let file = kit.write("subzero.toml", config);
        let mut entry = kit.entry(Scope::Project);
        entry.subzero_config = Some(file);
        InstallArgs {
            host: Host::Codex,
            entry,
            dry_run: false,
            force: false,
            config_path: None,
            trust: false,
            allow_tools: false,
        }
    }

    const TWO_CREDENTIALS: &str = r#"[credentials.openai]
env = "OPENAI_API_KEY"
origins = ["https://api.openai.com:443"]

[credentials.local]
file = "/home/me/.keys/local"
origins = ["http://127.0.0.1:8080"]

[credentials.other]
env = "OTHER_KEY"
origins = ["https://example.com:443"]
"#;

    #[test]
    fn env_vars_name_every_credential_variable_of_the_subzero_config_and_subzero_log() {
        let kit = Kit::new();
        let out = kit
            .install_args(with_config(&kit, TWO_CREDENTIALS))
            .expect("installs");
        let doc = parse(&kit.read(&kit.workspace.join(".codex/config.toml")));
        assert_eq!(
            strings(&doc["mcp_servers"]["subzero"]["env_vars"]),
            ["OPENAI_API_KEY", "OTHER_KEY", "SUBZERO_LOG"]
        );
        assert!(out.contains("OPENAI_API_KEY, OTHER_KEY"), "{out}");
    }

    #[test]
    fn a_state_dir_and_config_from_the_environment_become_explicit_arguments() {
        let mut kit = Kit::new();
        let config = kit.write("elsewhere.toml", TWO_CREDENTIALS);
        kit.env.subzero_vars = vec![
            ("SUBZERO_STATE_DIR".to_owned(), "/var/lib/sz".into()),
            ("SUBZERO_CONFIG".to_owned(), config.clone().into_os_string()),
            ("SUBZERO_DEMO_FLAG".to_owned(), "1".into()),
        ];
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        let doc = parse(&kit.read(&kit.workspace.join(".codex/config.toml")));
        let entry = &doc["mcp_servers"]["subzero"];
        let args = strings(&entry["args"]);
        let config = config.to_string_lossy().into_owned();
        assert_eq!(
            args[3..],
            ["--config", config.as_str(), "--state-dir", "/var/lib/sz"]
        );
        assert_eq!(
            strings(&entry["env_vars"]),
            [
                "OPENAI_API_KEY",
                "OTHER_KEY",
                "SUBZERO_DEMO_FLAG",
                "SUBZERO_LOG"
            ],
            "paths are arguments, not variables"
        );
    }

    #[test]
    fn an_xdg_state_home_is_passed_explicitly_but_the_home_default_is_not() {
        let mut kit = Kit::new();
        kit.install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        let path = kit.workspace.join(".codex/config.toml");
        let args = strings(&parse(&kit.read(&path))["mcp_servers"]["subzero"]["args"]);
        assert_eq!(args.len(), 3, "HOME alone resolves the same: {args:?}");

        kit.env.xdg_state_home = Some(PathBuf::from("/xdg/state"));
        kit.install(Host::Codex, Scope::Project, &["--force"])
            .expect("updates");
        let args = strings(&parse(&kit.read(&path))["mcp_servers"]["subzero"]["args"]);
        assert_eq!(args[3..], ["--state-dir", "/xdg/state/subzero"]);
    }

    #[test]
    fn env_vars_the_user_added_are_kept_and_a_new_credential_is_appended() {
        let kit = Kit::new();
        kit.install_args(with_config(&kit, TWO_CREDENTIALS))
            .expect("installs");
        let path = kit.workspace.join(".codex/config.toml");
        let text = kit
            .read(&path)
            .replace("env_vars = [", "env_vars = [\"MY_PROXY\", ");
        kit.write(".codex/config.toml", &text);
        let out = kit
            .install_args(with_config(&kit, TWO_CREDENTIALS))
            .expect("no conflict");
        assert!(out.contains("already installed"), "{out}");

        let more = format!("{TWO_CREDENTIALS}\n[credentials.new]\nenv = \"NEW_KEY\"\n");
        kit.install_args(with_config(&kit, &more))
            .expect("a new credential is an update without --force");
        let doc = parse(&kit.read(&path));
        assert_eq!(
            strings(&doc["mcp_servers"]["subzero"]["env_vars"]),
            [
                "MY_PROXY",
                "OPENAI_API_KEY",
                "OTHER_KEY",
                "SUBZERO_LOG",
                "NEW_KEY"
            ]
        );
    }

    #[test]
    fn trust_marks_the_project_in_the_user_file_once() {
        let kit = Kit::new();
        let user = kit.home.join(".codex/config.toml");
        kit.write(&user.to_string_lossy(), EXISTING);
        let out = kit
            .install(Host::Codex, Scope::Project, &[])
            .expect("installs");
        assert!(out.contains("--trust"), "untrusted is reported: {out}");
        assert_eq!(kit.read(&user), EXISTING, "no --trust, no change");

        let out = kit
            .install(Host::Codex, Scope::Project, &["--force", "--trust"])
            .expect("trusts");
        let updated = kit.read(&user);
        let (removed, added) = changed_lines(EXISTING, &updated);
        assert!(removed.is_empty(), "{removed:?}");
        assert_eq!(added.len(), 3, "{added:?}");
        let ws = kit.workspace_str();
        assert_eq!(
            parse(&updated)["projects"][ws.as_str()]["trust_level"].as_str(),
            Some("trusted")
        );
        assert!(out.contains("is trusted"), "{out}");

        let out = kit
            .install(Host::Codex, Scope::Project, &["--trust"])
            .expect("again");
        assert!(out.contains("already has it"), "{out}");
        assert_eq!(backups(&user).len(), 1);
    }

    #[test]
    fn trust_is_refused_for_hosts_without_a_project_trust_file_and_writes_nothing() {
        let kit = Kit::new();
        let err = kit
            .install(Host::OpenCode, Scope::Project, &["--trust"])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_flag_not_for_host");
        assert!(!kit.workspace.join("opencode.json").exists());
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
