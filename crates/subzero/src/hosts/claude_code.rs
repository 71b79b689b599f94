//! Claude Code: `mcpServers.subzero` with `"type": "stdio"`.
//!
//! Files: project scope `<workspace>/.mcp.json` (meant to be checked in; Claude Code asks once
//! before using a project server); user scope `~/.claude.json`, top-level `mcpServers`.
//! `~/.claude.json` is also Claude Code's own state file, so install while Claude Code is not
//! running. The equivalent CLI is
//! `claude mcp add --scope project|user --transport stdio subzero -- <binary> mcp …`.

use std::path::{Path, PathBuf};

use super::json::{Change, JsonDoc};
use super::{Field, HostEnv, HostsError, Launch, SERVER_NAME, Scope};

pub(super) const VERIFY: &str = "verify: run `claude mcp get subzero`, or `/mcp` inside Claude \
     Code; a project `.mcp.json` server is used after you approve it once at startup.";

pub(super) fn config_path(
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<PathBuf, HostsError> {
    Ok(match scope {
        Scope::Project => project_dir.join(".mcp.json"),
        Scope::User => env.home()?.join(".claude.json"),
    })
}

fn fields(launch: &Launch) -> Vec<(&'static str, Field)> {
    vec![
        ("type", Field::Str("stdio".to_owned())),
        ("command", Field::Str(launch.command.clone())),
        ("args", Field::Strings(launch.args.clone())),
        ("env", Field::ObjectPresent),
    ]
}

pub(super) fn merge(
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
) -> Result<String, HostsError> {
    let mut doc = JsonDoc::parse(path, original, "claude-code")?;
    match doc.upsert(path, &["mcpServers"], SERVER_NAME, &fields(launch), force)? {
        Change::Unchanged => Ok(original.unwrap_or_default().to_owned()),
        Change::Changed => Ok(doc.render()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{BINARY, Kit, assert_no_backup, assert_only_additions, backups};
    use super::super::{Host, InstallArgs, Scope};
    use serde_json::{Value, json};

    const PROJECT: &str = r#"{
  "mcpServers": {
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": {
        "Authorization": "Bearer ${GITHUB_TOKEN}"
      }
    },
    "playwright": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "@playwright/mcp@latest"
      ],
      "env": {}
    }
  }
}
"#;

    const USER_STATE: &str = r#"{
  "numStartups": 42,
  "installMethod": "native",
  "autoUpdates": true,
  "theme": "dark",
  "tipsHistory": {
    "new-user-warmup": 7
  },
  "projects": {
    "/home/me/src/app": {
      "allowedTools": [],
      "mcpServers": {
        "local-only": {
          "type": "stdio",
          "command": "node",
          "args": [
            "server.js"
          ],
          "env": {}
        }
      },
      "hasTrustDialogAccepted": true
    }
  },
  "userID": "0123abcd"
}
"#;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("valid JSON")
    }

    #[test]
    fn project_install_adds_the_entry_and_keeps_other_servers_intact() {
        let kit = Kit::new();
        let path = kit.write(".mcp.json", PROJECT);
        kit.install(Host::ClaudeCode, Scope::Project, &[])
            .expect("installs");
        let updated = kit.read(&path);
        assert_only_additions(PROJECT, &updated);
        let doc = parse(&updated);
        assert_eq!(
            doc["mcpServers"]["subzero"],
            json!({
                "type": "stdio",
                "command": BINARY,
                "args": ["mcp", "--workspace", kit.workspace_str()],
                "env": {}
            })
        );
        assert_eq!(
            doc["mcpServers"]["github"],
            parse(PROJECT)["mcpServers"]["github"]
        );
        assert_eq!(kit.read(&backups(&path)[0]), PROJECT);
    }

    #[test]
    fn user_install_touches_only_the_top_level_mcp_servers() {
        let kit = Kit::new();
        let path = kit.home.join(".claude.json");
        std::fs::write(&path, USER_STATE).expect("fixture");
        kit.install(Host::ClaudeCode, Scope::User, &[])
            .expect("installs");
        let updated = kit.read(&path);
        assert_only_additions(USER_STATE, &updated);
        let doc = parse(&updated);
        let keys: Vec<_> = doc.as_object().expect("object").keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "numStartups",
                "installMethod",
                "autoUpdates",
                "theme",
                "tipsHistory",
                "projects",
                "userID",
                "mcpServers"
            ],
            "key order kept, new key last"
        );
        assert_eq!(doc["mcpServers"]["subzero"]["args"], json!(["mcp"]));
        assert!(
            doc["projects"]["/home/me/src/app"]["mcpServers"]
                .get("subzero")
                .is_none()
        );
    }

    #[test]
    fn running_install_twice_changes_nothing_the_second_time() {
        let kit = Kit::new();
        let path = kit.write(".mcp.json", PROJECT);
        kit.install(Host::ClaudeCode, Scope::Project, &[])
            .expect("first");
        let first = kit.read(&path);
        let out = kit
            .install(Host::ClaudeCode, Scope::Project, &[])
            .expect("second");
        assert_eq!(kit.read(&path), first);
        assert_eq!(backups(&path).len(), 1);
        assert!(out.contains("already installed"), "{out}");
    }

    #[test]
    fn four_space_files_stay_four_space() {
        let kit = Kit::new();
        let four = "{\n    \"mcpServers\": {\n        \"a\": {\n            \"command\": \"x\"\n        }\n    }\n}\n";
        let path = kit.write(".mcp.json", four);
        kit.install(Host::ClaudeCode, Scope::Project, &[])
            .expect("installs");
        assert_only_additions(four, &kit.read(&path));
    }

    #[test]
    fn dry_run_prints_the_diff_and_writes_nothing() {
        let kit = Kit::new();
        let path = kit.write(".mcp.json", PROJECT);
        let out = kit
            .install(Host::ClaudeCode, Scope::Project, &["--dry-run"])
            .expect("dry run");
        assert_eq!(kit.read(&path), PROJECT);
        assert_no_backup(&path);
        assert!(out.contains("+    \"subzero\": {"), "{out}");
    }

    #[test]
    fn a_different_subzero_entry_is_refused_without_force_and_extra_fields_survive_force() {
        let kit = Kit::new();
        let existing = r#"{
  "mcpServers": {
    "subzero": {
      "type": "stdio",
      "command": "/usr/local/bin/subzero",
      "args": ["mcp"],
      "env": {"RUST_LOG": "debug"},
      "timeout": 90000
    }
  }
}
"#;
        let path = kit.write(".mcp.json", existing);
        let err = kit
            .install(Host::ClaudeCode, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_conflicting_entry");
        assert_eq!(kit.read(&path), existing);
        assert_no_backup(&path);

        kit.install(Host::ClaudeCode, Scope::Project, &["--force"])
            .expect("forced");
        let doc = parse(&kit.read(&path));
        let entry = &doc["mcpServers"]["subzero"];
        assert_eq!(entry["command"], json!(BINARY));
        assert_eq!(entry["env"], json!({"RUST_LOG": "debug"}), "user env kept");
        assert_eq!(entry["timeout"], json!(90000), "unmanaged field kept");
    }

    #[test]
    fn config_path_flag_edits_that_file() {
        let kit = Kit::new();
        let path = kit.write("elsewhere/servers.json", PROJECT);
        kit.install_args(InstallArgs {
            host: Host::ClaudeCode,
            entry: kit.entry(Scope::Project),
            dry_run: false,
            force: false,
            config_path: Some("elsewhere/servers.json".into()),
        })
        .expect("installs");
        assert!(
            parse(&kit.read(&path))["mcpServers"]
                .get("subzero")
                .is_some()
        );
        assert!(!kit.workspace.join(".mcp.json").exists());
    }

    #[test]
    fn invalid_json_is_refused_and_left_alone() {
        let kit = Kit::new();
        let path = kit.write(".mcp.json", "{\"mcpServers\": ");
        let err = kit
            .install(Host::ClaudeCode, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_invalid_json");
        assert_eq!(kit.read(&path), "{\"mcpServers\": ");
    }

    #[test]
    fn print_is_a_complete_mcp_json() {
        let kit = Kit::new();
        let printed = kit
            .print(Host::ClaudeCode, Scope::Project, &[])
            .expect("prints");
        let doc = parse(&printed);
        assert_eq!(doc["mcpServers"]["subzero"]["type"], json!("stdio"));
    }
}
