//! OpenCode: a `"type": "local"` server whose `command` is one array (program and arguments).
//!
//! Files: project scope `<workspace>/opencode.json`; user scope
//! `$XDG_CONFIG_HOME/opencode/opencode.json` (default `~/.config/opencode/opencode.json`). Where
//! only `opencode.jsonc` exists, that file is the target.
//!
//! Layouts: the documented one is `mcp.<name>` with `"enabled": true` (OpenCode 1.15 rejects a
//! local entry without `enabled`). The V2 docs put servers under `mcp.servers.<name>` and use
//! `disabled` instead; a file already in that layout gets a V2-shaped entry there.
//!
//! OpenCode accepts JSONC. A file with comments or trailing commas is refused (not rewritten),
//! with the message telling the user to paste `subzero hosts print opencode` by hand.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json::{Change, JsonDoc};
use super::tested::tested_with;
use super::{Field, Host, HostEnv, HostsError, Launch, SERVER_NAME, Scope};

pub(super) const SCHEMA_URL: &str = "https://opencode.ai/config.json";

/// OpenCode names an MCP tool `<server>_<tool>`, so the model sees `subzero_subzero_spawn`, ….
pub(super) const TOOL_PREFIX: &str = "subzero_";

/// How to check the entry. OpenCode reads the project file in that project (or a directory
/// below it) and the user file everywhere; it starts a local server in the directory it runs in,
/// which is the workspace a user-scope broker without `--workspace` serves.
pub(super) fn next_steps(scope: Scope) -> String {
    let tools = format!(
        "the model sees the tools as `{TOOL_PREFIX}subzero_spawn`, `{TOOL_PREFIX}subzero_get`, …"
    );
    let verify = match scope {
        Scope::Project => format!(
            "verify: run `opencode mcp list` in the workspace: `subzero` should show as \
             connected; {tools}."
        ),
        Scope::User => format!(
            "verify: run `opencode mcp list` in any project: `subzero` should show as connected; \
             {tools}. With no --workspace, the broker serves the directory OpenCode runs in."
        ),
    };
    match tested_with(Host::OpenCode) {
        Some(tested) => format!("{verify}\n{tested}"),
        None => verify,
    }
}

pub(super) fn config_path(
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<PathBuf, HostsError> {
    let dir = match scope {
        Scope::Project => project_dir.to_path_buf(),
        Scope::User => match &env.xdg_config_home {
            Some(config) => config.join("opencode"),
            None => env.home()?.join(".config").join("opencode"),
        },
    };
    let json = dir.join("opencode.json");
    let jsonc = dir.join("opencode.jsonc");
    Ok(if !json.exists() && jsonc.exists() {
        jsonc
    } else {
        json
    })
}

/// True when the file already uses the V2 `mcp.servers.<name>` layout.
fn uses_v2_layout(doc: &JsonDoc) -> bool {
    match doc.get(&["mcp", "servers"]) {
        // In the V1 layout `servers` would be a server entry, which always has `type`.
        Some(Value::Object(servers)) => !servers.contains_key("type"),
        _ => false,
    }
}

pub(super) fn merge(
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
) -> Result<String, HostsError> {
    let mut doc = JsonDoc::parse(path, original, "opencode")?;
    if doc.is_empty() {
        doc.insert_if_absent("$schema", Value::String(SCHEMA_URL.to_owned()));
    }
    let mut fields = vec![
        ("type", Field::Str("local".to_owned())),
        ("command", Field::Strings(launch.argv())),
    ];
    let container: &[&str] = if uses_v2_layout(&doc) {
        &["mcp", "servers"]
    } else {
        fields.push(("enabled", Field::Bool(true)));
        &["mcp"]
    };
    match doc.upsert(path, container, SERVER_NAME, &fields, force)? {
        Change::Unchanged => Ok(original.unwrap_or_default().to_owned()),
        Change::Changed => Ok(doc.render()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{BINARY, Kit, assert_no_backup, assert_only_additions, backups};
    use super::super::{Host, Scope};
    use super::*;
    use serde_json::json;

    const EXISTING: &str = r#"{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "autoupdate": false,
  "mcp": {
    "context7": {
      "type": "remote",
      "url": "https://mcp.context7.com/mcp",
      "enabled": true
    },
    "everything": {
      "type": "local",
      "command": [
        "npx",
        "-y",
        "@modelcontextprotocol/server-everything"
      ],
      "enabled": false,
      "environment": {
        "DEBUG": "1"
      }
    }
  },
  "permission": {
    "bash": "ask"
  }
}
"#;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("valid JSON")
    }

    #[test]
    fn install_adds_a_local_enabled_entry_and_keeps_the_rest() {
        let kit = Kit::new();
        let path = kit.write("opencode.json", EXISTING);
        kit.install(Host::OpenCode, Scope::Project, &[])
            .expect("installs");
        let updated = kit.read(&path);
        assert_only_additions(EXISTING, &updated);
        let doc = parse(&updated);
        assert_eq!(
            doc["mcp"]["subzero"],
            json!({
                "type": "local",
                "command": [BINARY, "mcp", "--workspace", kit.workspace_str()],
                "enabled": true
            })
        );
        assert_eq!(doc["permission"], json!({"bash": "ask"}));
        assert_eq!(kit.read(&backups(&path)[0]), EXISTING);
    }

    #[test]
    fn running_install_twice_changes_nothing_the_second_time() {
        let kit = Kit::new();
        let path = kit.write("opencode.json", EXISTING);
        kit.install(Host::OpenCode, Scope::Project, &[])
            .expect("first");
        let first = kit.read(&path);
        let out = kit
            .install(Host::OpenCode, Scope::Project, &[])
            .expect("second");
        assert_eq!(kit.read(&path), first);
        assert_eq!(backups(&path).len(), 1);
        assert!(out.contains("already installed"), "{out}");
    }

    #[test]
    fn npx_writes_the_launcher_at_this_version_and_a_second_run_changes_nothing() {
        let kit = Kit::new();
        let path = kit.write("opencode.json", EXISTING);
        kit.install(Host::OpenCode, Scope::Project, &["--npx"])
            .expect("installs");
        let written = kit.read(&path);
        let command: Vec<String> = std::iter::once("npx".to_owned())
            .chain(kit.npx_args())
            .collect();
        assert_eq!(
            parse(&written)["mcp"]["subzero"],
            json!({"type": "local", "command": command, "enabled": true})
        );
        let again = kit
            .install(Host::OpenCode, Scope::Project, &["--npx"])
            .expect("second");
        assert_eq!(kit.read(&path), written);
        assert!(again.contains("already installed"), "{again}");
    }

    #[test]
    fn jsonc_with_comments_is_refused_and_left_byte_identical() {
        let kit = Kit::new();
        let jsonc = "{\n  // my MCP servers\n  \"mcp\": {}\n}\n";
        let path = kit.write("opencode.jsonc", jsonc);
        let err = kit
            .install(Host::OpenCode, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_jsonc_not_supported");
        let message = err.to_string();
        assert!(message.contains("opencode.jsonc"), "{message}");
        assert!(message.contains("line 2"), "{message}");
        assert!(
            message.contains("subzero hosts print opencode"),
            "{message}"
        );
        assert_eq!(kit.read(&path), jsonc);
        assert_no_backup(&path);
    }

    #[test]
    fn trailing_commas_are_refused_too() {
        let kit = Kit::new();
        let path = kit.write("opencode.json", "{\n  \"mcp\": {},\n}\n");
        let err = kit
            .install(Host::OpenCode, Scope::Project, &[])
            .expect_err("refused");
        assert!(err.to_string().contains("trailing commas"), "{err}");
        assert_no_backup(&path);
    }

    #[test]
    fn a_v2_layout_file_gets_a_v2_entry_under_servers() {
        let kit = Kit::new();
        let v2 = r#"{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "servers": {
      "my-server": {
        "type": "local",
        "command": ["npx", "-y", "example-mcp-server"]
      }
    }
  }
}
"#;
        let path = kit.write("opencode.json", v2);
        kit.install(Host::OpenCode, Scope::Project, &[])
            .expect("installs");
        let doc = parse(&kit.read(&path));
        let entry = &doc["mcp"]["servers"]["subzero"];
        assert_eq!(entry["type"], json!("local"));
        assert!(
            entry.get("enabled").is_none(),
            "V2 has no `enabled`: {entry}"
        );
        assert!(doc["mcp"].get("subzero").is_none());
    }

    #[test]
    fn a_new_file_starts_with_the_schema() {
        let kit = Kit::new();
        kit.install(Host::OpenCode, Scope::Project, &[])
            .expect("installs");
        let doc = parse(&kit.read(&kit.workspace.join("opencode.json")));
        let keys: Vec<_> = doc.as_object().expect("object").keys().cloned().collect();
        assert_eq!(keys, ["$schema", "mcp"]);
        assert_eq!(doc["$schema"], json!(SCHEMA_URL));
    }

    #[test]
    fn user_scope_uses_xdg_config_home() {
        let mut kit = Kit::new();
        let xdg = kit.home.join("xdg");
        kit.env.xdg_config_home = Some(xdg.clone());
        kit.install(Host::OpenCode, Scope::User, &[])
            .expect("installs");
        let doc = parse(&kit.read(&xdg.join("opencode/opencode.json")));
        assert_eq!(doc["mcp"]["subzero"]["command"], json!([BINARY, "mcp"]));
    }

    #[test]
    fn install_says_how_to_check_and_the_tool_names_the_model_sees() {
        let kit = Kit::new();
        let out = kit
            .install(Host::OpenCode, Scope::Project, &[])
            .expect("installs");
        assert!(
            out.contains("`opencode mcp list` in the workspace"),
            "{out}"
        );
        assert!(out.contains("subzero_subzero_spawn"), "{out}");
        assert!(out.contains("tested with: opencode-ai"), "{out}");
    }

    #[test]
    fn user_scope_hint_says_which_directory_the_broker_serves() {
        let kit = Kit::new();
        let out = kit
            .install(Host::OpenCode, Scope::User, &[])
            .expect("installs");
        assert!(out.contains("in any project"), "{out}");
        assert!(out.contains("the directory OpenCode runs in"), "{out}");
        assert!(!out.contains("in the workspace"), "{out}");
    }

    #[test]
    fn a_different_entry_is_refused_without_force() {
        let kit = Kit::new();
        let existing = "{\n  \"mcp\": {\n    \"subzero\": {\n      \"type\": \"local\",\n      \"command\": [\"subzero\", \"mcp\"],\n      \"enabled\": false\n    }\n  }\n}\n";
        let path = kit.write("opencode.json", existing);
        let err = kit
            .install(Host::OpenCode, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_conflicting_entry");
        assert_eq!(kit.read(&path), existing);
    }
}
