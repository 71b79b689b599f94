//! Claude Code: `mcpServers.subzero` with `"type": "stdio"`.
//!
//! Files: project scope `<workspace>/.mcp.json` (meant to be checked in; Claude Code asks once
//! before using a project server); user scope `~/.claude.json`, top-level `mcpServers`.
//! `~/.claude.json` is also Claude Code's own state file, so install while Claude Code is not
//! running. The equivalent CLI is
//! `claude mcp add --scope project|user --transport stdio subzero -- <binary> mcp …`.

use std::path::{Path, PathBuf};

use super::json::{Change, JsonDoc};
use super::{ExtraEdit, Field, HostEnv, HostsError, Launch, SERVER_NAME, Scope, edit};

/// The permission rule that allows every tool of the `subzero` server.
pub(super) const ALLOW_RULE: &str = "mcp__subzero";

/// How to check the entry, and the two steps Claude Code still asks for: approving a project
/// `.mcp.json` server (interactive start only) and allowing its tools.
pub(super) fn next_steps(scope: Scope) -> String {
    let trust = match scope {
        Scope::Project => {
            " (Claude Code ignores a project's permissions until the workspace is trusted: \
             accept the trust dialog of an interactive `claude` there once, or add --trust)"
        }
        Scope::User => "",
    };
    let (verify, settings) = match scope {
        Scope::Project => (
            "verify: run `claude mcp list` in the workspace: a project `.mcp.json` server shows \
             `Pending approval` until you start `claude` there once and approve it (headless \
             `claude -p` uses it without asking); then it shows `Connected`.",
            "<workspace>/.claude/settings.json",
        ),
        Scope::User => (
            "verify: run `claude mcp list` in any directory: `subzero` should show `Connected`.",
            "~/.claude/settings.json",
        ),
    };
    format!(
        "{verify}\ntools: Claude Code names them `mcp__subzero__subzero_spawn` … \
         `mcp__subzero__subzero_info` and asks before each call; headless runs (`claude -p`) \
         need `--allowedTools {ALLOW_RULE}`, or run install again with --allow-tools to add \
         `{ALLOW_RULE}` to `permissions.allow` in {settings}{trust}."
    )
}

/// `--trust`: `projects["<dir>"].hasTrustDialogAccepted = true` in `~/.claude.json`, what
/// accepting Claude Code's trust dialog in that directory records.
pub(super) fn trust_edit(project_dir: &Path, env: &HostEnv) -> Result<ExtraEdit, HostsError> {
    let path = edit::resolve_symlink(&env.home()?.join(".claude.json"));
    let original = edit::read_optional(&path)?;
    let mut doc = JsonDoc::parse(&path, original.as_deref(), "claude-code")?;
    let dir = super::launch::utf8(project_dir)?;
    let trusted = [("hasTrustDialogAccepted", Field::Bool(true))];
    let updated = match doc.upsert(&path, &["projects"], &dir, &trusted, true)? {
        Change::Unchanged => original.clone().unwrap_or_default(),
        Change::Changed => doc.render(),
    };
    Ok(ExtraEdit {
        path,
        original,
        updated,
        what: format!(
            "{dir} is trusted, so Claude Code applies its .claude/settings.json (quit Claude \
             Code first: it rewrites this file while it runs)"
        ),
    })
}

/// `--allow-tools`: `"mcp__subzero"` in `permissions.allow` of the scope's settings file.
pub(super) fn allow_edit(
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<ExtraEdit, HostsError> {
    let path = edit::resolve_symlink(&match scope {
        Scope::Project => project_dir.join(".claude").join("settings.json"),
        Scope::User => env.home()?.join(".claude").join("settings.json"),
    });
    let original = edit::read_optional(&path)?;
    let mut doc = JsonDoc::parse(&path, original.as_deref(), "claude-code")?;
    let updated = match doc.append_unique(&path, &["permissions"], "allow", ALLOW_RULE)? {
        Change::Unchanged => original.clone().unwrap_or_default(),
        Change::Changed => doc.render(),
    };
    Ok(ExtraEdit {
        path,
        original,
        updated,
        what: format!(
            "`{ALLOW_RULE}` in permissions.allow lets Claude Code call the Subzero tools without asking"
        ),
    })
}

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
    fn npx_writes_the_launcher_at_this_version_and_a_second_run_changes_nothing() {
        let kit = Kit::new();
        let path = kit.write(".mcp.json", PROJECT);
        kit.install(Host::ClaudeCode, Scope::Project, &["--npx"])
            .expect("installs");
        let written = kit.read(&path);
        assert_eq!(
            parse(&written)["mcpServers"]["subzero"],
            json!({"type": "stdio", "command": "npx", "args": kit.npx_args(), "env": {}})
        );
        let again = kit
            .install(Host::ClaudeCode, Scope::Project, &["--npx"])
            .expect("second");
        assert_eq!(kit.read(&path), written);
        assert!(again.contains("already installed"), "{again}");
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
            trust: false,
            allow_tools: false,
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
    fn allow_tools_adds_the_rule_once_and_keeps_the_other_permissions() {
        let kit = Kit::new();
        let settings = r#"{
  "permissions": {
    "allow": [
      "Bash(ls:*)"
    ],
    "deny": [
      "Read(./.env)"
    ]
  },
  "model": "sonnet"
}
"#;
        let path = kit.write(".claude/settings.json", settings);
        let out = kit
            .install(Host::ClaudeCode, Scope::Project, &["--allow-tools"])
            .expect("installs");
        let doc = parse(&kit.read(&path));
        assert_eq!(
            doc["permissions"],
            json!({"allow": ["Bash(ls:*)", "mcp__subzero"], "deny": ["Read(./.env)"]})
        );
        assert_eq!(doc["model"], json!("sonnet"));
        assert!(out.contains("mcp__subzero"), "{out}");

        let out = kit
            .install(Host::ClaudeCode, Scope::Project, &["--allow-tools"])
            .expect("again");
        assert!(out.contains("already has it"), "{out}");
        assert_eq!(backups(&path).len(), 1);
    }

    #[test]
    fn allow_tools_with_user_scope_writes_the_user_settings() {
        let kit = Kit::new();
        kit.install(Host::ClaudeCode, Scope::User, &["--allow-tools"])
            .expect("installs");
        let doc = parse(&kit.read(&kit.home.join(".claude/settings.json")));
        assert_eq!(doc["permissions"]["allow"], json!(["mcp__subzero"]));
        assert!(!kit.workspace.join(".claude").exists());
    }

    #[test]
    fn trust_marks_only_this_workspace_in_claude_json() {
        let kit = Kit::new();
        let path = kit.home.join(".claude.json");
        std::fs::write(&path, USER_STATE).expect("fixture");
        kit.install(Host::ClaudeCode, Scope::Project, &["--trust"])
            .expect("installs");
        let doc = parse(&kit.read(&path));
        let ws = kit.workspace_str();
        assert_eq!(
            doc["projects"][ws.as_str()],
            json!({"hasTrustDialogAccepted": true})
        );
        assert_eq!(
            doc["projects"]["/home/me/src/app"],
            parse(USER_STATE)["projects"]["/home/me/src/app"]
        );
        assert!(
            doc.get("mcpServers").is_none(),
            "project scope: no user entry"
        );
    }

    #[test]
    fn allow_tools_is_refused_for_other_hosts_before_anything_is_written() {
        let kit = Kit::new();
        let err = kit
            .install(Host::Codex, Scope::Project, &["--allow-tools"])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_flag_not_for_host");
        assert!(!kit.workspace.join(".codex").exists());
    }

    #[test]
    fn the_printed_steps_name_the_headless_permission_and_the_scope_files() {
        let kit = Kit::new();
        let project = kit
            .install(Host::ClaudeCode, Scope::Project, &[])
            .expect("installs");
        assert!(project.contains("--allowedTools mcp__subzero"), "{project}");
        assert!(project.contains("Pending approval"), "{project}");
        assert!(
            project.contains("<workspace>/.claude/settings.json"),
            "{project}"
        );
        let user = kit
            .install(Host::ClaudeCode, Scope::User, &[])
            .expect("installs");
        assert!(user.contains("~/.claude/settings.json"), "{user}");
        assert!(!user.contains("Pending approval"), "{user}");
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
