//! Test scaffolding: a temporary home and workspace, and `print`/`install` runs against them.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use super::{
    EntryArgs, Host, HostEnv, HostsAction, HostsCommand, HostsError, InstallArgs, PrintArgs, Scope,
    run_in,
};

/// The executable path every test entry names (it need not exist).
pub(super) const BINARY: &str = "/opt/subzero/bin/subzero";

/// What `--npx` has npx run: the launcher at this build's version.
pub(super) const NPX_PACKAGE: &str = concat!("subzero-mcp@", env!("CARGO_PKG_VERSION"));

#[derive(Debug)]
pub(super) struct Kit {
    _dir: tempfile::TempDir,
    pub(super) workspace: PathBuf,
    pub(super) home: PathBuf,
    pub(super) env: HostEnv,
}

impl Kit {
    pub(super) fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(dir.path()).expect("canonical tempdir");
        let workspace = root.join("work");
        let home = root.join("home");
        fs::create_dir_all(&workspace).expect("workspace");
        fs::create_dir_all(&home).expect("home");
        let env = HostEnv {
            cwd: workspace.clone(),
            home: Some(home.clone()),
            current_exe: Some(PathBuf::from(BINARY)),
            codex_home: None,
            xdg_config_home: None,
            pi_agent_dir: None,
            path: None,
            xdg_state_home: None,
            subzero_vars: Vec::new(),
            now: UNIX_EPOCH + Duration::from_secs(1_795_983_083),
        };
        Kit {
            _dir: dir,
            workspace,
            home,
            env,
        }
    }

    pub(super) fn workspace_str(&self) -> String {
        self.workspace.to_string_lossy().into_owned()
    }

    pub(super) fn entry(&self, scope: Scope) -> EntryArgs {
        EntryArgs {
            scope,
            workspace: None,
            subzero_config: None,
            binary: None,
            npx: false,
        }
    }

    /// The arguments of the `--npx` entry for the workspace: `npx` then these.
    pub(super) fn npx_args(&self) -> Vec<String> {
        let mut args: Vec<String> = ["-y", NPX_PACKAGE, "mcp", "--workspace"]
            .map(str::to_owned)
            .to_vec();
        args.push(self.workspace_str());
        args
    }

    /// Writes `text` to `rel` under the workspace (or an absolute path) and returns the path.
    pub(super) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.workspace.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("parent dir");
        }
        fs::write(&path, text).expect("write fixture");
        path
    }

    pub(super) fn read(&self, path: &Path) -> String {
        fs::read_to_string(path).expect("read file")
    }

    /// `install` with `--dry-run` / `--force` / `--trust` / `--allow-tools` / `--npx` taken
    /// from `flags`; returns what it printed.
    pub(super) fn install(
        &self,
        host: Host,
        scope: Scope,
        flags: &[&str],
    ) -> Result<String, HostsError> {
        self.install_args(InstallArgs {
            host,
            entry: EntryArgs {
                npx: flags.contains(&"--npx"),
                ..self.entry(scope)
            },
            dry_run: flags.contains(&"--dry-run"),
            force: flags.contains(&"--force"),
            config_path: None,
            trust: flags.contains(&"--trust"),
            allow_tools: flags.contains(&"--allow-tools"),
        })
    }

    pub(super) fn install_args(&self, args: InstallArgs) -> Result<String, HostsError> {
        self.run(HostsAction::Install(args))
    }

    /// `print`, with `--extension` taken from `flags`.
    pub(super) fn print(
        &self,
        host: Host,
        scope: Scope,
        flags: &[&str],
    ) -> Result<String, HostsError> {
        self.run(HostsAction::Print(PrintArgs {
            host,
            entry: self.entry(scope),
            extension: flags.contains(&"--extension"),
        }))
    }

    fn run(&self, action: HostsAction) -> Result<String, HostsError> {
        let mut out = Vec::new();
        run_in(&self.env, HostsCommand { action }, &mut out)?;
        Ok(String::from_utf8(out).expect("utf-8 output"))
    }
}

/// The backups made of `path`.
pub(super) fn backups(path: &Path) -> Vec<PathBuf> {
    let name = path
        .file_name()
        .expect("file name")
        .to_string_lossy()
        .into_owned();
    let prefix = format!("{name}.bak.");
    let parent = path.parent().expect("parent");
    let mut found: Vec<_> = fs::read_dir(parent)
        .expect("list dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

pub(super) fn assert_no_backup(path: &Path) {
    let found = backups(path);
    assert!(found.is_empty(), "unexpected backups: {found:?}");
}

/// Lines the diff from `old` to `new` removed and added.
pub(super) fn changed_lines(old: &str, new: &str) -> (Vec<String>, Vec<String>) {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for change in diff.iter_all_changes() {
        let line = change.value().trim_end_matches('\n').to_owned();
        match change.tag() {
            similar::ChangeTag::Delete => removed.push(line),
            similar::ChangeTag::Insert => added.push(line),
            similar::ChangeTag::Equal => {}
        }
    }
    (removed, added)
}

/// In JSON, appending a key after an object's last entry must add a comma to that entry's
/// closing line; nothing else of the existing text may change.
pub(super) fn assert_only_additions(old: &str, new: &str) {
    let (removed, added) = changed_lines(old, new);
    for line in &removed {
        assert!(
            added.contains(&format!("{line},")),
            "line changed beyond a trailing comma: {line:?}\nnew text:\n{new}"
        );
    }
    assert!(
        removed.len() <= 1,
        "more than one line changed: {removed:?}"
    );
}
