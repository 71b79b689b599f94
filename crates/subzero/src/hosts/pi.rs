//! Pi 1.x (`@earendil-works/pi-coding-agent`): `mcpServers.subzero` (`command` + `args`) in
//! Pi's own `mcp.json`, which Pi's built-in MCP support reads; optionally a tiny extension calling
//! `pi.registerMcpServer`, printed from a template embedded in the binary.
//!
//! Files: user scope `$PI_CODING_AGENT_DIR/mcp.json` (default `~/.pi/agent/mcp.json`); project
//! scope `<workspace>/.pi/mcp.json`, which Pi reads only for trusted projects (`--approve`, or a
//! `true` for the project or a parent in `<agent dir>/trust.json`).
//!
//! The entry sets `"exposure": "direct"`: Pi's default, `codemode`, connects the server but
//! declares none of its tools to the model, so a parent could not call `subzero_spawn`. A
//! `description` is added when the entry has none; one the user wrote is theirs.
//!
//! Pi 0.x (`@mariozechner/pi-coding-agent`) has no MCP support at all. `install` looks at the
//! `pi` on `PATH` and says so when that is the one installed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json::{Change, JsonDoc};
use super::tested::tested_with;
use super::{ExtraEdit, Field, Host, HostEnv, HostsError, Launch, SERVER_NAME, Scope};

/// The optional extension; `__SUBZERO_COMMAND__` / `__SUBZERO_ARGS__` / `__SUBZERO_DESCRIPTION__`
/// become JSON literals.
const EXTENSION_TEMPLATE: &str = include_str!("templates/pi-extension.ts");

/// The wake extension `install` writes; `__SUBZERO_COMMAND__` and `__SUBZERO_LEAD__` become
/// JSON literals.
const WAKE_TEMPLATE: &str = include_str!("templates/pi-wake.ts");
/// Its file name in Pi's extensions directory.
pub(super) const WAKE_FILE: &str = "subzero-wake.ts";

/// The npm package of Pi 1.x, the first Pi with MCP support.
pub(super) const PACKAGE: &str = "@earendil-works/pi-coding-agent";
/// The npm package of Pi 0.x, which has no MCP support.
const PACKAGE_0X: &str = "@mariozechner/pi-coding-agent";

/// How the tools reach the model: declared like built-in tools.
pub(super) const EXPOSURE: &str = "direct";

/// What the server offers, in the sentence Pi shows and ranks tools by.
pub(super) const DESCRIPTION: &str = "Delegate work to persistent child agents: subzero_spawn \
     starts one, subzero_get waits for its result, subzero_send follows up, subzero_output reads \
     its full output.";

pub(super) fn config_path(
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<PathBuf, HostsError> {
    Ok(match scope {
        Scope::Project => project_dir.join(".pi").join("mcp.json"),
        Scope::User => agent_dir(env)?.join("mcp.json"),
    })
}

/// Pi's agent directory: `$PI_CODING_AGENT_DIR`, default `~/.pi/agent`.
fn agent_dir(env: &HostEnv) -> Result<PathBuf, HostsError> {
    match &env.pi_agent_dir {
        Some(dir) => Ok(dir.clone()),
        None => Ok(env.home()?.join(".pi").join("agent")),
    }
}

/// The fields `install` manages; `description` only while the entry has none.
fn fields(launch: &Launch, existing: Option<&Value>) -> Vec<(&'static str, Field)> {
    let mut fields = vec![
        ("command", Field::Str(launch.command.clone())),
        ("args", Field::Strings(launch.args.clone())),
        ("exposure", Field::Str(EXPOSURE.to_owned())),
    ];
    let described = existing
        .and_then(|entry| entry.get("description"))
        .is_some_and(Value::is_string);
    if !described {
        fields.push(("description", Field::Str(DESCRIPTION.to_owned())));
    }
    fields
}

pub(super) fn merge(
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
) -> Result<String, HostsError> {
    let mut doc = JsonDoc::parse(path, original, "pi")?;
    let fields = fields(launch, doc.get(&["mcpServers", SERVER_NAME]));
    match doc.upsert(path, &["mcpServers"], SERVER_NAME, &fields, force)? {
        Change::Unchanged => Ok(original.unwrap_or_default().to_owned()),
        Change::Changed => Ok(doc.render()),
    }
}

/// The extension source with the command, arguments and description filled in as JSON (valid
/// TypeScript) literals, so no path can break out of its string.
pub(super) fn extension_source(launch: &Launch) -> String {
    let literal = |s: &str| Value::String(s.to_owned()).to_string();
    let args = Value::from(launch.args.clone()).to_string();
    EXTENSION_TEMPLATE
        .replace("__SUBZERO_COMMAND__", &literal(&launch.command))
        .replace("__SUBZERO_ARGS__", &args)
        .replace("__SUBZERO_EXPOSURE__", &literal(EXPOSURE))
        .replace("__SUBZERO_DESCRIPTION__", &literal(DESCRIPTION))
}

/// The wake extension (`templates/pi-wake.ts`) in the scope's extensions directory: Pi loads
/// `~/.pi/agent/extensions/*.ts` always and `<project>/.pi/extensions/*.ts` once the project
/// is trusted, like the project's mcp.json.
pub(super) fn wake_edit(
    scope: Scope,
    project_dir: &Path,
    launch: &Launch,
    env: &HostEnv,
) -> Result<ExtraEdit, HostsError> {
    let dir = match scope {
        Scope::Project => project_dir.join(".pi").join("extensions"),
        Scope::User => agent_dir(env)?.join("extensions"),
    };
    let path = super::edit::resolve_symlink(&dir.join(WAKE_FILE));
    let original = super::edit::read_optional(&path)?;
    let command = Value::String(launch.command.clone()).to_string();
    let lead = Value::from(launch.lead.clone()).to_string();
    Ok(ExtraEdit {
        path,
        original,
        updated: WAKE_TEMPLATE
            .replace("__SUBZERO_COMMAND__", &command)
            .replace("__SUBZERO_LEAD__", &lead),
        what: "the wake extension: a run the Pi session started comes back to it as a follow-up \
               turn when it ends (delete the file to turn that off)"
            .to_owned(),
    })
}

/// The trust step (project scope), how to check the entry, and a warning when the `pi` on
/// `PATH` is Pi 0.x.
pub(super) fn next_steps(scope: Scope, project_dir: &Path, env: &HostEnv) -> String {
    let mut lines = Vec::new();
    if let Some(warning) = installed_pi(env).and_then(|pi| pi.warning()) {
        lines.push(warning);
    }
    let tools = "the model sees the tools as `mcp__subzero__subzero_spawn`, \
                 `mcp__subzero__subzero_get`, …";
    match scope {
        Scope::Project => {
            let dir = project_dir.display();
            lines.push(trust_step(project_dir, env));
            lines.push(format!(
                "verify: once trusted, run `pi mcp list` in {dir}: it should print `subzero: \
                 connected, 8 tools (direct, project)`; {tools}."
            ));
        }
        Scope::User => lines.push(format!(
            "verify: run `pi mcp list` in any directory: it should print `subzero: connected, 8 \
             tools (direct, global)`; {tools}."
        )),
    }
    lines.extend(tested_with(Host::Pi));
    lines.join("\n")
}

/// Pi skips a project's `.pi/mcp.json` silently unless the project is trusted.
fn trust_step(project_dir: &Path, env: &HostEnv) -> String {
    let dir = project_dir.display();
    let Ok(trust_file) = agent_dir(env).map(|d| d.join("trust.json")) else {
        return format!(
            "trust: Pi reads {dir}/.pi/mcp.json only in a trusted project: start `pi` there and \
             choose Trust, or pass `--approve` for one run."
        );
    };
    match saved_trust(&trust_file, project_dir) {
        Some(true) => format!(
            "trust: {dir} is already trusted in {}, so Pi reads its .pi/mcp.json.",
            trust_file.display()
        ),
        Some(false) => format!(
            "trust: {dir} is marked NOT trusted in {}, so Pi ignores its .pi/mcp.json: run `/trust` \
             in `pi` there (or set it to true in that file), or pass `--approve` for one run.",
            trust_file.display()
        ),
        None => format!(
            "trust: Pi reads {dir}/.pi/mcp.json only once the project is trusted, and skips it \
             silently otherwise: start `pi` in {dir} and choose Trust (saved in {}), or pass \
             `--approve` (`pi -p --approve \"…\"`) for one run. Headless runs (`pi -p`) never ask.",
            trust_file.display()
        ),
    }
}

/// The decision saved for `dir` or its nearest parent, as Pi looks it up; `None` when there is
/// none (or the file cannot be read, which Pi would report itself).
fn saved_trust(trust_file: &Path, dir: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(trust_file).ok()?;
    let Value::Object(entries) = serde_json::from_str::<Value>(&text).ok()? else {
        return None;
    };
    dir.ancestors()
        .find_map(|d| entries.get(d.to_str()?).and_then(Value::as_bool))
}

/// The Pi that `PATH` runs, as far as its npm package tells.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InstalledPi {
    executable: PathBuf,
    package: Option<(String, String)>,
}

impl InstalledPi {
    fn warning(&self) -> Option<String> {
        let (name, version) = self.package.as_ref()?;
        let exe = self.executable.display();
        let too_old = name == PACKAGE_0X || (name == PACKAGE && version.starts_with("0."));
        too_old.then(|| {
            format!(
                "warning: the `pi` on PATH ({exe}) is {name} {version}, which has no MCP support: \
                 it ignores mcp.json, and the extension makes it exit (`pi.registerMcpServer is not \
                 a function`). Install Pi 1.x, which needs Node >= 22.19: `npm install -g {PACKAGE}` \
                 (and `npm uninstall -g {PACKAGE_0X}`)."
            )
        })
    }
}

/// The first `pi` on `PATH` and the npm package it belongs to (found by walking up from the
/// resolved script to a `package.json` naming a Pi package). Nothing is executed.
fn installed_pi(env: &HostEnv) -> Option<InstalledPi> {
    let executable = std::env::split_paths(env.path.as_ref()?)
        .map(|dir| dir.join("pi"))
        .find(|candidate| candidate.is_file())?;
    let resolved = std::fs::canonicalize(&executable).unwrap_or_else(|_| executable.clone());
    let package = resolved.ancestors().skip(1).find_map(pi_package);
    Some(InstalledPi {
        executable,
        package,
    })
}

/// `(name, version)` of the Pi package whose root is `dir`.
fn pi_package(dir: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    let name = manifest.get("name")?.as_str()?;
    let version = manifest.get("version")?.as_str()?;
    [PACKAGE, PACKAGE_0X]
        .contains(&name)
        .then(|| (name.to_owned(), version.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{
        BINARY, Kit, NPX_PACKAGE, assert_no_backup, assert_only_additions, backups,
    };
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
            json!({
                "command": BINARY,
                "args": ["mcp", "--workspace", kit.workspace_str()],
                "exposure": "direct",
                "description": DESCRIPTION
            })
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
    fn npx_writes_the_launcher_at_this_version_and_the_wake_runs_wait_through_it() {
        let kit = Kit::new();
        let path = kit.write(".pi/mcp.json", EXISTING);
        kit.install(Host::Pi, Scope::Project, &["--npx"])
            .expect("installs");
        let written = kit.read(&path);
        let entry = &parse(&written)["mcpServers"]["subzero"];
        assert_eq!(entry["command"], "npx");
        assert_eq!(entry["args"], json!(kit.npx_args()));
        let wake = kit.read(&kit.workspace.join(".pi/extensions").join(WAKE_FILE));
        assert!(wake.contains("const SUBZERO: string = \"npx\";"), "{wake}");
        let lead = format!(
            "const SUBZERO_LEAD: string[] = {};",
            json!(["-y", NPX_PACKAGE])
        );
        assert!(wake.contains(&lead), "{wake}");
        let again = kit
            .install(Host::Pi, Scope::Project, &["--npx"])
            .expect("second");
        assert_eq!(kit.read(&path), written);
        assert!(again.contains("already installed"), "{again}");
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
    fn the_entry_declares_the_tools_to_the_model_with_a_description() {
        let kit = Kit::new();
        kit.install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        let doc = parse(&kit.read(&kit.workspace.join(".pi/mcp.json")));
        let entry = &doc["mcpServers"]["subzero"];
        // Pi's default exposure, codemode, would connect the server and hide every tool.
        assert_eq!(entry["exposure"], json!("direct"));
        assert!(
            entry["description"]
                .as_str()
                .is_some_and(|d| d.contains("subzero_spawn")),
            "{entry}"
        );
    }

    #[test]
    fn a_description_the_user_wrote_is_kept_and_not_a_conflict() {
        let kit = Kit::new();
        kit.install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        let path = kit.workspace.join(".pi/mcp.json");
        let mine = kit.read(&path).replace(DESCRIPTION, "My delegation server");
        std::fs::write(&path, &mine).expect("edit description");
        let out = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect("still installed");
        assert!(out.contains("already installed"), "{out}");
        assert_eq!(kit.read(&path), mine);
    }

    #[test]
    fn an_entry_from_before_exposure_is_refused_then_upgraded_with_force() {
        let kit = Kit::new();
        let ws = kit.workspace_str();
        let old = format!(
            "{{\n  \"mcpServers\": {{\n    \"subzero\": {{\n      \"command\": \"{BINARY}\",\n      \
             \"args\": [\"mcp\", \"--workspace\", \"{ws}\"],\n      \"timeout\": 120\n    }}\n  }}\n}}\n"
        );
        let path = kit.write(".pi/mcp.json", &old);
        let err = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect_err("refused");
        assert_eq!(err.code(), "hosts_conflicting_entry");
        assert!(
            err.to_string().contains("\"exposure\": \"direct\""),
            "{err}"
        );
        kit.install(Host::Pi, Scope::Project, &["--force"])
            .expect("upgraded");
        let entry = parse(&kit.read(&path))["mcpServers"]["subzero"].clone();
        assert_eq!(entry["exposure"], json!("direct"));
        assert_eq!(entry["timeout"], json!(120), "the user's own field is kept");
    }

    #[test]
    fn project_scope_prints_the_trust_step_and_how_to_check() {
        let kit = Kit::new();
        let out = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        let trust_file = kit.home.join(".pi/agent/trust.json");
        assert!(out.contains("--approve"), "{out}");
        assert!(out.contains(&trust_file.display().to_string()), "{out}");
        assert!(out.contains("pi mcp list"), "{out}");
        assert!(out.contains("(direct, project)"), "{out}");
        assert!(out.contains("mcp__subzero__subzero_spawn"), "{out}");
        assert!(
            out.contains("tested with: @earendil-works/pi-coding-agent"),
            "{out}"
        );
    }

    #[test]
    fn a_project_already_trusted_through_a_parent_is_reported_as_trusted() {
        let kit = Kit::new();
        let parent = kit.workspace.parent().expect("parent").to_path_buf();
        let trust = json!({ parent.to_str().expect("utf-8"): true }).to_string();
        std::fs::create_dir_all(kit.home.join(".pi/agent")).expect("agent dir");
        std::fs::write(kit.home.join(".pi/agent/trust.json"), trust).expect("trust file");
        let out = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        assert!(out.contains("already trusted"), "{out}");
    }

    #[test]
    fn a_project_marked_untrusted_says_how_to_change_it() {
        let kit = Kit::new();
        let trust = json!({ kit.workspace_str(): false }).to_string();
        std::fs::create_dir_all(kit.home.join(".pi/agent")).expect("agent dir");
        std::fs::write(kit.home.join(".pi/agent/trust.json"), trust).expect("trust file");
        let out = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        assert!(out.contains("NOT trusted"), "{out}");
        assert!(out.contains("/trust"), "{out}");
    }

    #[test]
    fn user_scope_needs_no_trust_step() {
        let kit = Kit::new();
        let out = kit.install(Host::Pi, Scope::User, &[]).expect("installs");
        assert!(!out.contains("trust"), "{out}");
        assert!(out.contains("(direct, global)"), "{out}");
    }

    /// A `pi` on PATH that is the npm package `name` at `version`, laid out as npm does.
    fn fake_pi_on_path(kit: &mut Kit, name: &str, version: &str) {
        let root = kit.home.join("npm/lib/node_modules").join(name);
        std::fs::create_dir_all(root.join("dist")).expect("package dir");
        std::fs::write(
            root.join("package.json"),
            json!({"name": name, "version": version}).to_string(),
        )
        .expect("manifest");
        std::fs::write(root.join("dist/cli.js"), "#!/usr/bin/env node\n").expect("script");
        let bin = kit.home.join("npm/bin");
        std::fs::create_dir_all(&bin).expect("bin dir");
        std::os::unix::fs::symlink(root.join("dist/cli.js"), bin.join("pi")).expect("symlink");
        kit.env.path = Some(std::env::join_paths([kit.home.join("empty"), bin]).expect("PATH"));
    }

    #[test]
    fn pi_0x_on_path_is_explained_with_the_package_to_install() {
        let mut kit = Kit::new();
        fake_pi_on_path(&mut kit, PACKAGE_0X, "0.73.1");
        let out = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect("installs anyway");
        assert!(
            out.contains("@mariozechner/pi-coding-agent 0.73.1"),
            "{out}"
        );
        assert!(out.contains("no MCP support"), "{out}");
        assert!(
            out.contains("npm install -g @earendil-works/pi-coding-agent"),
            "{out}"
        );
        assert!(out.contains("22.19"), "{out}");
    }

    #[test]
    fn pi_1x_on_path_gets_no_warning() {
        let mut kit = Kit::new();
        fake_pi_on_path(&mut kit, PACKAGE, "1.6.0");
        let out = kit
            .install(Host::Pi, Scope::Project, &[])
            .expect("installs");
        assert!(!out.contains("warning"), "{out}");
    }

    #[test]
    fn the_extension_registers_the_same_command_with_quoted_literals() {
        let launch = Launch {
            command: "/opt/sub \"zero\"/subzero".to_owned(),
            args: vec!["mcp".to_owned(), "--workspace".to_owned(), "/w".to_owned()],
            lead: Vec::new(),
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
        assert!(source.contains(r#"exposure: "direct","#), "{source}");
        assert!(
            source.contains(&format!("description: {},", json!(DESCRIPTION))),
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
