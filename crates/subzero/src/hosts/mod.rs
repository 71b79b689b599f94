//! `subzero hosts print|install <host>`: the stdio server entry that makes a host (Codex, Claude
//! Code, OpenCode, Pi) start `subzero mcp`, printed or merged into the host's own config file.
//!
//! What callers may rely on:
//! - `install` parses the host file with a format-keeping parser (`toml_edit` for TOML,
//!   `serde_json` with `preserve_order` for JSON), changes only the `subzero` entry, and writes
//!   nothing when the entry is already right ("already installed", exit 0).
//! - A file is backed up (`<file>.bak.<UTC timestamp>`) before it is changed; a new file needs no
//!   backup. `--dry-run` prints a unified diff and writes nothing.
//! - An existing `subzero` entry whose managed fields differ is refused
//!   ([`HostsError::ConflictingEntry`]) unless `--force`; fields subzero does not manage are kept.
//! - JSON files with comments or trailing commas (JSONC) are refused, never rewritten.

mod claude_code;
mod codex;
mod edit;
mod error;
mod json;
mod launch;
mod opencode;
mod pi;
mod tested;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use edit::Outcome;
pub use error::HostsError;
use launch::{Launch, Resolved, resolve};
pub use tested::host_adapters;

/// Name of the server entry in every host file.
const SERVER_NAME: &str = "subzero";

/// `subzero hosts …`
#[derive(Debug, Clone, clap::Args)]
pub struct HostsCommand {
    #[command(subcommand)]
    pub action: HostsAction,
}

/// The two things `subzero hosts` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum HostsAction {
    /// Print the host's configuration snippet for `subzero mcp`; nothing is written.
    Print(PrintArgs),
    /// Merge the `subzero` server entry into the host's own configuration file.
    Install(InstallArgs),
}

/// The hosts Subzero knows how to configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// OpenAI Codex CLI: `config.toml`, `[mcp_servers.subzero]`.
    Codex,
    /// Claude Code: `.mcp.json` (project) or `~/.claude.json` (user), `mcpServers.subzero`.
    ClaudeCode,
    /// OpenCode: `opencode.json`, `mcp.subzero`.
    #[value(name = "opencode")]
    OpenCode,
    /// Pi 1.x: `mcp.json`, `mcpServers.subzero`.
    Pi,
}

impl Host {
    /// The name used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Host::Codex => "codex",
            Host::ClaudeCode => "claude-code",
            Host::OpenCode => "opencode",
            Host::Pi => "pi",
        }
    }
}

/// Which of the host's configuration files to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Scope {
    /// The file inside the workspace (shared with whoever opens that project).
    #[default]
    Project,
    /// The file in the user's home (every project).
    User,
}

/// What the entry runs: `<binary> mcp [--workspace DIR] [--config FILE]`, or with `--npx`
/// `npx -y subzero-mcp@<this version> mcp …`.
#[derive(Debug, Clone, clap::Args)]
pub struct EntryArgs {
    /// Which host file: the project's (inside the workspace) or the user's.
    #[arg(long, value_enum, default_value_t = Scope::Project)]
    pub scope: Scope,
    /// Workspace the broker serves. Default: the current directory for project scope; for user
    /// scope no `--workspace` is written and the broker uses the directory the host starts it in.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Subzero configuration file, passed to the broker as `--config FILE`.
    #[arg(long, value_name = "FILE")]
    pub subzero_config: Option<PathBuf>,
    /// The subzero executable the host starts. Default: this executable's absolute path.
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Start the broker from npm instead: `npx -y subzero-mcp@<this version>` (the launcher
    /// package with this platform's prebuilt binaries; no Rust toolchain needed).
    #[arg(long, conflicts_with = "binary")]
    pub npx: bool,
}

/// `subzero hosts print <host>`
#[derive(Debug, Clone, clap::Args)]
pub struct PrintArgs {
    #[arg(value_enum)]
    pub host: Host,
    #[command(flatten)]
    pub entry: EntryArgs,
    /// Pi only: print the optional extension file (calls `pi.registerMcpServer`) instead of the
    /// `mcp.json` entry.
    #[arg(long)]
    pub extension: bool,
}

/// `subzero hosts install <host>`
#[derive(Debug, Clone, clap::Args)]
pub struct InstallArgs {
    #[arg(value_enum)]
    pub host: Host,
    #[command(flatten)]
    pub entry: EntryArgs,
    /// Show the change as a unified diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replace the fields subzero manages in an existing, different `subzero` entry.
    #[arg(long)]
    pub force: bool,
    /// The host file to edit, instead of the scope's default location.
    #[arg(long, value_name = "PATH")]
    pub config_path: Option<PathBuf>,
    /// Codex and Claude Code: also mark the project trusted in the host's own user file, as
    /// its trust prompt would. Codex: `[projects."<dir>"] trust_level = "trusted"` in
    /// `~/.codex/config.toml` (it ignores a project `.codex/config.toml` until then). Claude
    /// Code: `projects["<dir>"].hasTrustDialogAccepted` in `~/.claude.json` (it ignores the
    /// project's `.claude/settings.json` permissions until then).
    #[arg(long)]
    pub trust: bool,
    /// Claude Code only: also allow the Subzero tools without a prompt (`"mcp__subzero"` in
    /// `permissions.allow` of `<workspace>/.claude/settings.json`, or of
    /// `~/.claude/settings.json` with `--scope user`); headless runs (`claude -p`) need it.
    #[arg(long)]
    pub allow_tools: bool,
}

/// The process facts `hosts` depends on, gathered once so tests can supply their own.
#[derive(Debug, Clone)]
pub struct HostEnv {
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub current_exe: Option<PathBuf>,
    /// `$CODEX_HOME` (Codex's user directory, default `~/.codex`).
    pub codex_home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (OpenCode's user config lives in `<it>/opencode`, default `~/.config`).
    pub xdg_config_home: Option<PathBuf>,
    /// `$PI_CODING_AGENT_DIR` (Pi's agent directory, default `~/.pi/agent`).
    pub pi_agent_dir: Option<PathBuf>,
    /// `$PATH`, to find which host is installed (Pi 0.x has no MCP support).
    pub path: Option<OsString>,
    /// `$XDG_STATE_HOME` (where the broker's state lives unless `SUBZERO_STATE_DIR` says).
    pub xdg_state_home: Option<PathBuf>,
    /// Every `SUBZERO_*` variable set (Codex passes none of them to the broker).
    pub subzero_vars: Vec<(String, OsString)>,
    /// Used for backup file names.
    pub now: SystemTime,
}

impl HostEnv {
    /// Reads the real process environment.
    pub fn from_process() -> Result<Self, HostsError> {
        let var = |name: &str| non_empty(std::env::var_os(name));
        Ok(HostEnv {
            cwd: std::env::current_dir().map_err(HostsError::CurrentDir)?,
            home: var("HOME"),
            current_exe: std::env::current_exe().ok(),
            codex_home: var("CODEX_HOME"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            pi_agent_dir: var("PI_CODING_AGENT_DIR"),
            path: std::env::var_os("PATH"),
            xdg_state_home: var("XDG_STATE_HOME"),
            subzero_vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
                .filter(|(k, v)| k.starts_with("SUBZERO_") && !v.is_empty())
                .collect(),
            now: SystemTime::now(),
        })
    }

    fn home(&self) -> Result<&Path, HostsError> {
        self.home.as_deref().ok_or(HostsError::HomeUnknown)
    }
}

fn non_empty(value: Option<OsString>) -> Option<PathBuf> {
    value.filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Entry point for `subzero hosts …`: reads the process environment, writes messages to `out`.
pub fn run(cmd: HostsCommand, out: &mut dyn Write) -> Result<(), HostsError> {
    let env = HostEnv::from_process()?;
    run_in(&env, cmd, out)
}

/// [`run`] with an explicit environment.
pub fn run_in(env: &HostEnv, cmd: HostsCommand, out: &mut dyn Write) -> Result<(), HostsError> {
    match cmd.action {
        HostsAction::Print(args) => print(env, &args, out),
        HostsAction::Install(args) => install(env, &args, out),
    }
}

/// A value subzero writes into a host entry. Hosts differ in syntax, not in these.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Str(String),
    Strings(Vec<String>),
    Int(i64),
    Bool(bool),
    /// An object/table must exist; its contents belong to the user (e.g. `env`).
    ObjectPresent,
}

/// The file a host reads for this scope.
fn default_config_path(
    host: Host,
    scope: Scope,
    project_dir: &Path,
    env: &HostEnv,
) -> Result<PathBuf, HostsError> {
    match host {
        Host::Codex => codex::config_path(scope, project_dir, env),
        Host::ClaudeCode => claude_code::config_path(scope, project_dir, env),
        Host::OpenCode => opencode::config_path(scope, project_dir, env),
        Host::Pi => pi::config_path(scope, project_dir, env),
    }
}

/// The host file's new text with the `subzero` entry merged in (or `original` unchanged).
fn merge(
    host: Host,
    path: &Path,
    original: Option<&str>,
    launch: &Launch,
    force: bool,
    env: &HostEnv,
) -> Result<String, HostsError> {
    match host {
        Host::Codex => codex::merge(path, original, launch, force, env),
        Host::ClaudeCode => claude_code::merge(path, original, launch, force),
        Host::OpenCode => opencode::merge(path, original, launch, force),
        Host::Pi => pi::merge(path, original, launch, force),
    }
}

/// What to do once the entry is written: how to check it for this scope, and any step the host
/// still needs before it starts the server (Pi's project trust, a Pi 0.x install found on PATH).
fn next_steps(
    host: Host,
    scope: Scope,
    project_dir: &Path,
    launch: &Launch,
    env: &HostEnv,
) -> String {
    match host {
        Host::Codex => codex::next_steps(scope, project_dir, launch, env),
        Host::ClaudeCode => claude_code::next_steps(scope),
        Host::OpenCode => opencode::next_steps(scope),
        Host::Pi => pi::next_steps(scope, project_dir, env),
    }
}

fn print(env: &HostEnv, args: &PrintArgs, out: &mut dyn Write) -> Result<(), HostsError> {
    let resolved = resolve(env, &args.entry)?;
    let text = if args.extension {
        if args.host != Host::Pi {
            return Err(HostsError::ExtensionNotForHost {
                host: args.host.name(),
            });
        }
        pi::extension_source(&resolved.launch)
    } else {
        // The snippet is exactly what `install` would write into an empty file.
        let path = default_config_path(args.host, args.entry.scope, &resolved.project_dir, env)
            .unwrap_or_else(|_| PathBuf::from(args.host.name()));
        merge(args.host, &path, None, &resolved.launch, false, env)?
    };
    out.write_all(text.as_bytes()).map_err(HostsError::Output)
}

/// A second file `install` edits: Codex's project trust (`--trust`), Claude Code's allow
/// rule (`--allow-tools`), Pi's wake extension (always).
struct ExtraEdit {
    path: PathBuf,
    original: Option<String>,
    updated: String,
    /// What the change does, for the message ("marked … trusted").
    what: String,
}

/// The extra edits the flags ask for; a flag given for the wrong host is refused before
/// anything is written.
fn extra_edits(
    env: &HostEnv,
    args: &InstallArgs,
    resolved: &Resolved,
) -> Result<Vec<ExtraEdit>, HostsError> {
    let project_dir = resolved.project_dir.as_path();
    let refuse = |flag, for_host: &'static str| HostsError::FlagNotForHost {
        flag,
        for_host,
        host: args.host.name(),
    };
    let mut edits = Vec::new();
    if args.trust {
        edits.push(match args.host {
            Host::Codex => codex::trust_edit(project_dir, env)?,
            Host::ClaudeCode => claude_code::trust_edit(project_dir, env)?,
            _ => return Err(refuse("trust", "codex` or `claude-code")),
        });
    }
    if args.allow_tools {
        if args.host != Host::ClaudeCode {
            return Err(refuse("allow-tools", "claude-code"));
        }
        edits.push(claude_code::allow_edit(args.entry.scope, project_dir, env)?);
    }
    if args.host == Host::Pi {
        edits.push(pi::wake_edit(
            args.entry.scope,
            project_dir,
            &resolved.launch,
            env,
        )?);
    }
    Ok(edits)
}

fn apply_extra(
    edit: ExtraEdit,
    dry_run: bool,
    env: &HostEnv,
    out: &mut dyn Write,
) -> Result<String, HostsError> {
    let shown = edit.path.display();
    let what = &edit.what;
    Ok(
        match edit::apply(
            &edit.path,
            edit.original.as_deref(),
            &edit.updated,
            dry_run,
            env.now,
            out,
        )? {
            Outcome::Unchanged => format!("{shown} already has it: {what}; nothing changed.\n"),
            Outcome::DryRun => format!("dry run: {shown} would change as shown ({what}).\n"),
            Outcome::Created => format!("created {shown}: {what}.\n"),
            Outcome::Updated { backup } => {
                format!("updated {shown} (backup: {}): {what}.\n", backup.display())
            }
        },
    )
}

fn install(env: &HostEnv, args: &InstallArgs, out: &mut dyn Write) -> Result<(), HostsError> {
    let resolved = resolve(env, &args.entry)?;
    let extra = extra_edits(env, args, &resolved)?;
    let path = match &args.config_path {
        Some(path) => env.cwd.join(path),
        None => default_config_path(args.host, args.entry.scope, &resolved.project_dir, env)?,
    };
    let path = edit::resolve_symlink(&path);
    let original = edit::read_optional(&path)?;
    let updated = merge(
        args.host,
        &path,
        original.as_deref(),
        &resolved.launch,
        args.force,
        env,
    )?;
    let outcome = edit::apply(
        &path,
        original.as_deref(),
        &updated,
        args.dry_run,
        env.now,
        out,
    )?;
    // Applied before the message is made so that the next steps see it (e.g. Codex's trust).
    let extra = extra
        .into_iter()
        .map(|edit| apply_extra(edit, args.dry_run, env, out))
        .collect::<Result<String, _>>()?;
    let host = args.host.name();
    let shown = path.display();
    let next = || {
        next_steps(
            args.host,
            args.entry.scope,
            &resolved.project_dir,
            &resolved.launch,
            env,
        )
    };
    let message = match outcome {
        Outcome::Unchanged => {
            format!("subzero is already installed for {host} in {shown}; nothing changed.\n")
        }
        Outcome::DryRun => format!("dry run: {shown} would change as shown; nothing written.\n"),
        Outcome::Created => format!(
            "created {shown} with the subzero entry for {host}.\n{}\n",
            next()
        ),
        Outcome::Updated { backup } => format!(
            "updated {shown} (backup: {}).\n{}\n",
            backup.display(),
            next()
        ),
    };
    out.write_all(message.as_bytes())
        .map_err(HostsError::Output)?;
    out.write_all(extra.as_bytes()).map_err(HostsError::Output)
}

#[cfg(test)]
mod testkit;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        top: Top,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Top {
        Hosts(HostsCommand),
    }

    fn parse(args: &[&str]) -> HostsCommand {
        let cli = Cli::try_parse_from(std::iter::once("subzero").chain(args.iter().copied()))
            .expect("command line parses");
        let Top::Hosts(cmd) = cli.top;
        cmd
    }

    #[test]
    fn install_command_line_parses_every_flag() {
        let cmd = parse(&[
            "hosts",
            "install",
            "claude-code",
            "--dry-run",
            "--scope",
            "user",
            "--config-path",
            "x.json",
            "--workspace",
            "/w",
            "--subzero-config",
            "c.toml",
            "--binary",
            "/bin/subzero",
            "--force",
        ]);
        let HostsAction::Install(args) = cmd.action else {
            panic!("expected install");
        };
        assert_eq!(args.host, Host::ClaudeCode);
        assert!(args.dry_run && args.force);
        assert_eq!(args.entry.scope, Scope::User);
        assert_eq!(args.config_path, Some(PathBuf::from("x.json")));
        assert_eq!(args.entry.workspace, Some(PathBuf::from("/w")));
        assert_eq!(args.entry.subzero_config, Some(PathBuf::from("c.toml")));
        assert_eq!(args.entry.binary, Some(PathBuf::from("/bin/subzero")));
    }

    #[test]
    fn npx_parses_and_cannot_be_combined_with_binary() {
        let HostsAction::Print(args) = parse(&["hosts", "print", "pi", "--npx"]).action else {
            panic!("expected print");
        };
        assert!(args.entry.npx && args.entry.binary.is_none());
        let argv = [
            "subzero", "hosts", "install", "codex", "--npx", "--binary", "/b",
        ];
        let err = Cli::try_parse_from(argv).expect_err("refused");
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn host_names_on_the_command_line_are_the_documented_ones() {
        for (name, host) in [
            ("codex", Host::Codex),
            ("claude-code", Host::ClaudeCode),
            ("opencode", Host::OpenCode),
            ("pi", Host::Pi),
        ] {
            let HostsAction::Print(args) = parse(&["hosts", "print", name]).action else {
                panic!("expected print");
            };
            assert_eq!(args.host, host);
            assert_eq!(host.name(), name);
        }
    }

    #[test]
    fn project_scope_runs_the_broker_on_the_current_directory() {
        let kit = testkit::Kit::new();
        let resolved = resolve(&kit.env, &kit.entry(Scope::Project)).expect("resolves");
        let ws = kit.workspace_str();
        assert_eq!(resolved.launch.command, testkit::BINARY);
        assert_eq!(resolved.launch.args, ["mcp", "--workspace", ws.as_str()]);
    }

    #[test]
    fn user_scope_without_workspace_omits_the_flag_and_passes_the_config() {
        let kit = testkit::Kit::new();
        let mut entry = kit.entry(Scope::User);
        entry.subzero_config = Some(PathBuf::from("sz.toml"));
        let resolved = resolve(&kit.env, &entry).expect("resolves");
        let config = format!("{}/sz.toml", kit.workspace_str());
        assert_eq!(resolved.launch.args, ["mcp", "--config", config.as_str()]);
    }

    #[test]
    fn a_config_file_that_does_not_exist_yet_is_still_written_as_a_clean_absolute_path() {
        let kit = testkit::Kit::new();
        let mut entry = kit.entry(Scope::Project);
        entry.subzero_config = Some(PathBuf::from("../conf/./sz.toml"));
        let resolved = resolve(&kit.env, &entry).expect("resolves");
        let parent = kit.workspace.parent().expect("parent");
        let want = parent.join("conf/sz.toml");
        assert_eq!(
            resolved.launch.args.last(),
            Some(&want.to_string_lossy().into_owned())
        );
    }

    #[test]
    fn a_missing_workspace_is_refused_with_its_path() {
        let kit = testkit::Kit::new();
        let mut entry = kit.entry(Scope::Project);
        entry.workspace = Some(PathBuf::from("does-not-exist"));
        let err = resolve(&kit.env, &entry).expect_err("refused");
        assert_eq!(err.code(), "hosts_workspace_missing");
        assert!(err.to_string().contains("does-not-exist"));
    }

    #[test]
    fn extension_is_refused_for_hosts_other_than_pi() {
        let kit = testkit::Kit::new();
        let args = PrintArgs {
            host: Host::Codex,
            entry: kit.entry(Scope::Project),
            extension: true,
        };
        let err = print(&kit.env, &args, &mut Vec::new()).expect_err("refused");
        assert_eq!(err.code(), "hosts_extension_not_for_host");
    }
}
