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
fn npx_writes_the_launcher_at_this_version_and_a_second_run_changes_nothing() {
    let kit = Kit::new();
    let path = kit.write(".codex/config.toml", EXISTING);
    kit.install(Host::Codex, Scope::Project, &["--npx"])
        .expect("installs");
    let written = kit.read(&path);
    let doc = parse(&written);
    let entry = &doc["mcp_servers"]["subzero"];
    assert_eq!(entry["command"].as_str(), Some("npx"));
    let args: Vec<_> = entry["args"]
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    assert_eq!(args, kit.npx_args());
    assert_eq!(entry["tool_timeout_sec"].as_integer(), Some(60));
    let again = kit
        .install(Host::Codex, Scope::Project, &["--npx"])
        .expect("second");
    assert_eq!(kit.read(&path), written);
    assert!(again.contains("already installed"), "{again}");
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
