//! Pi 1.x: `mcpServers.subzero` (`command` + `args`) in Pi's own `mcp.json`, which Pi's built-in
//! MCP support reads; optionally a tiny extension calling `pi.registerMcpServer`, printed from a
//! template embedded in the binary.
//!
//! Files: user scope `$PI_CODING_AGENT_DIR/mcp.json` (default `~/.pi/agent/mcp.json`); project
//! scope `<workspace>/.pi/mcp.json`, which Pi reads only for trusted projects.

use std::path::{Path, PathBuf};

use super::json::{Change, JsonDoc};
use super::{Field, HostEnv, HostsError, Launch, SERVER_NAME, Scope};

/// The optional extension; `__SUBZERO_COMMAND__` / `__SUBZERO_ARGS__` become JSON literals.
const EXTENSION_TEMPLATE: &str = include_str!("templates/pi-extension.ts");

pub(super) const VERIFY: &str = "verify: start `pi` in the workspace and run `/mcp`; `subzero` \
     should be connected (a project `.pi/mcp.json` is read only once the project is trusted).";

pub(super) fn config_path(
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<PathBuf, HostsError> {
    Ok(match scope {
        Scope::Project => project_dir.join(".pi").join("mcp.json"),
        Scope::User => match &env.pi_agent_dir {
            Some(dir) => dir.join("mcp.json"),
            None => env.home()?.join(".pi").join("agent").join("mcp.json"),
        },
    })
}

fn fields(launch: &Launch) -> Vec<(&'static str, Field)> {
    vec![
        ("command", Field::Str(launch.command.clone())),
        ("args", Field::Strings(launch.args.clone())),
    ]
}

pub(super) fn merge(
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
) -> Result<String, HostsError> {
    let mut doc = JsonDoc::parse(path, original, "pi")?;
    match doc.upsert(path, &["mcpServers"], SERVER_NAME, &fields(launch), force)? {
        Change::Unchanged => Ok(original.unwrap_or_default().to_owned()),
        Change::Changed => Ok(doc.render()),
    }
}

/// The extension source with the command and arguments filled in as JSON (valid TypeScript)
/// literals, so no path can break out of its string.
pub(super) fn extension_source(launch: &Launch) -> String {
    let command = serde_json::Value::String(launch.command.clone()).to_string();
    let args = serde_json::Value::from(launch.args.clone()).to_string();
    EXTENSION_TEMPLATE
        .replace("__SUBZERO_COMMAND__", &command)
        .replace("__SUBZERO_ARGS__", &args)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{BINARY, Kit, assert_no_backup, assert_only_additions, backups};
    use super::super::{Host, Scope};
    use super::*;
    use serde_json::{Value, json};

    const EXISTING: &str = r#"{
  "mcpServers": {
    "chrome-devtools": {
      "command": "npx",
      "args": [
        "-y",
        "chrome-devtools-mcp@1.6.0"
      ]
    },
    "exa": {
      "command": "npx",
      "args": [
        "-y",
        "exa-mcp-server"
      ],
      "env": {
        "EXA_API_KEY": "$EXA_API_KEY"
      },
      "enabled": false
    }
  }
}
"#;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("valid JSON")
    }

    #[test]
    fn install_adds_the_entry_and_keeps_other_servers() {
        let kit = Kit::new();
        let path = kit.write(".pi/mcp.json", EXISTING);
        kit.install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        let updated = kit.read(&path);
        assert_only_additions(EXISTING, &updated);
        let doc = parse(&updated);
        assert_eq!(
            doc["mcpServers"]["subzero"],
            json!({"command": BINARY, "args": ["mcp", "--workspace", kit.workspace_str()]})
        );
        assert_eq!(
            doc["mcpServers"]["exa"],
            parse(EXISTING)["mcpServers"]["exa"]
        );
        assert_eq!(kit.read(&backups(&path)[0]), EXISTING);
    }

    #[test]
    fn running_install_twice_changes_nothing_the_second_time() {
        let kit = Kit::new();
        let path = kit.write(".pi/mcp.json", EXISTING);
        kit.install(Host::Pi, Scope::Project, &[]).expect("first");
        let first = kit.read(&path);
        let out = kit.install(Host::Pi, Scope::Project, &[]).expect("second");
        assert_eq!(kit.read(&path), first);
        assert_eq!(backups(&path).len(), 1);
        assert!(out.contains("already installed"), "{out}");
    }

    #[test]
    fn dry_run_on_a_missing_file_shows_a_new_file_and_creates_nothing() {
        let kit = Kit::new();
        let out = kit
            .install(Host::Pi, Scope::Project, &["--dry-run"])
            .expect("dry run");
        assert!(out.contains("--- /dev/null"), "{out}");
        assert!(
            !kit.workspace.join(".pi").exists(),
            "not even the directory"
        );
    }

    #[test]
    fn a_different_entry_is_refused_without_force() {
        let kit = Kit::new();
        let existing = "{\"mcpServers\": {\"subzero\": \"subzero mcp\"}}\n";
        let path = kit.write(".pi/mcp.json", existing);
        let err = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_conflicting_entry");
        assert_eq!(kit.read(&path), existing);
        assert_no_backup(&path);
    }

    #[test]
    fn user_scope_honours_the_agent_dir_variable() {
        let mut kit = Kit::new();
        let agent = kit.home.join("agent-dir");
        kit.env.pi_agent_dir = Some(agent.clone());
        kit.install(Host::Pi, Scope::User, &[]).expect("installs");
        assert!(parse(&kit.read(&agent.join("mcp.json")))["mcpServers"]["subzero"].is_object());
    }

    #[test]
    fn the_extension_registers_the_same_command_with_quoted_literals() {
        let launch = Launch {
            command: "/opt/sub \"zero\"/subzero".to_owned(),
            args: vec!["mcp".to_owned(), "--workspace".to_owned(), "/w".to_owned()],
        };
        let source = extension_source(&launch);
        assert!(
            source.contains("pi.registerMcpServer(\"subzero\""),
            "{source}"
        );
        assert!(
            source.contains(r#"command: "/opt/sub \"zero\"/subzero","#),
            "{source}"
        );
        assert!(
            source.contains(r#"args: ["mcp","--workspace","/w"],"#),
            "{source}"
        );
        assert!(!source.contains("__SUBZERO_"), "{source}");
    }

    #[test]
    fn print_extension_uses_the_resolved_launch() {
        let kit = Kit::new();
        let source = kit
            .print(Host::Pi, Scope::Project, &["--extension"])
            .expect("prints");
        assert!(source.contains(BINARY), "{source}");
        assert!(source.contains(&kit.workspace_str()), "{source}");
    }
}
