//! What Codex's entry must carry for the broker to find what the installer's shell finds:
//! Codex starts a stdio server with a fixed few variables plus those named in `env_vars`, so
//! paths the environment moves become explicit arguments and credential variables are named.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item};

use subzero_runtime::paths::{PathEnv, resolve_config_path, resolve_state_dir};

use crate::hosts::{HostEnv, Launch};

/// Variables passed through even when unset at install time (Codex skips unset ones).
const ALWAYS_PASSED: &[&str] = &["SUBZERO_LOG"];

/// The broker's paths and variables as Codex will start it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CodexEntry {
    pub(super) launch: Launch,
    /// The Subzero config file the broker will read.
    pub(super) subzero_config: PathBuf,
    /// Variables named in `[credentials.*] env`, in file order.
    pub(super) credential_vars: Vec<String>,
    /// `credential_vars` then the `SUBZERO_*` variables to pass through.
    pub(super) env_vars: Vec<String>,
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

/// The entry for `launch`: `--config` / `--state-dir` added where Codex's environment (HOME
/// alone) would resolve them elsewhere, and the variables `env_vars` must name.
pub(super) fn entry(launch: &Launch, env: &HostEnv) -> CodexEntry {
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
