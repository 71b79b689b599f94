//! Where state and configuration live.
//!
//! Resolution is a pure function of explicit inputs (the CLI flag and an environment
//! snapshot), so tests never touch the process environment. Precedence: flag, then
//! `SUBZERO_STATE_DIR` / `SUBZERO_CONFIG`, then the XDG base directory (only when it is
//! absolute, as the XDG spec requires), then `$HOME`.

use std::ffi::OsString;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use subzero_core::ChildId;

use crate::error::{RuntimeError, RuntimeResult};

/// The environment variables that influence path resolution.
#[derive(Clone, Debug, Default)]
pub struct PathEnv {
    /// `SUBZERO_STATE_DIR`.
    pub subzero_state_dir: Option<OsString>,
    /// `SUBZERO_CONFIG`.
    pub subzero_config: Option<OsString>,
    /// `XDG_STATE_HOME`.
    pub xdg_state_home: Option<OsString>,
    /// `XDG_CONFIG_HOME`.
    pub xdg_config_home: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
}

impl PathEnv {
    /// Snapshot the current process environment.
    pub fn from_process() -> Self {
        let get = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        PathEnv {
            subzero_state_dir: get("SUBZERO_STATE_DIR"),
            subzero_config: get("SUBZERO_CONFIG"),
            xdg_state_home: get("XDG_STATE_HOME"),
            xdg_config_home: get("XDG_CONFIG_HOME"),
            home: get("HOME"),
        }
    }
}

fn absolute(path: PathBuf) -> RuntimeResult<PathBuf> {
    std::path::absolute(&path)
        .map_err(|e| RuntimeError::io(format!("cannot make {} absolute", path.display()), e))
}

fn xdg_dir(
    xdg: Option<&OsString>,
    home: Option<&OsString>,
    home_suffix: &str,
    what: &str,
    flag: &str,
) -> RuntimeResult<PathBuf> {
    if let Some(base) = xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(base.join("subzero"));
    }
    match home.map(PathBuf::from).filter(|p| p.is_absolute()) {
        Some(home) => Ok(home.join(home_suffix).join("subzero")),
        None => Err(RuntimeError::InvalidRequest(format!(
            "cannot locate the {what}: HOME is unset or relative; pass {flag}"
        ))),
    }
}

/// The state directory: `--state-dir`, `SUBZERO_STATE_DIR`, `$XDG_STATE_HOME/subzero`,
/// or `$HOME/.local/state/subzero`.
pub fn resolve_state_dir(flag: Option<&Path>, env: &PathEnv) -> RuntimeResult<PathBuf> {
    if let Some(flag) = flag {
        return absolute(flag.to_path_buf());
    }
    if let Some(dir) = &env.subzero_state_dir {
        return absolute(PathBuf::from(dir));
    }
    xdg_dir(
        env.xdg_state_home.as_ref(),
        env.home.as_ref(),
        ".local/state",
        "state directory",
        "--state-dir or set SUBZERO_STATE_DIR",
    )
}

/// The configuration file: `--config`, `SUBZERO_CONFIG`,
/// `$XDG_CONFIG_HOME/subzero/config.toml`, or `$HOME/.config/subzero/config.toml`.
pub fn resolve_config_path(flag: Option<&Path>, env: &PathEnv) -> RuntimeResult<PathBuf> {
    if let Some(flag) = flag {
        return absolute(flag.to_path_buf());
    }
    if let Some(file) = &env.subzero_config {
        return absolute(PathBuf::from(file));
    }
    Ok(xdg_dir(
        env.xdg_config_home.as_ref(),
        env.home.as_ref(),
        ".config",
        "configuration file",
        "--config or set SUBZERO_CONFIG",
    )?
    .join("config.toml"))
}

/// The layout of one state directory. Every broker of one OS user shares it.
#[derive(Clone, Debug)]
pub struct StatePaths {
    root: PathBuf,
}

impl StatePaths {
    /// Use `root` as the state directory, creating it and its subdirectories (mode 0700).
    pub fn create(root: impl Into<PathBuf>) -> RuntimeResult<Self> {
        let paths = StatePaths { root: root.into() };
        let mut builder = DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for dir in [
            paths.root.clone(),
            paths.locks_dir(),
            paths.locks_dir().join("children"),
            paths.locks_dir().join("slots"),
            paths.locks_dir().join("owners"),
            paths.artifacts_dir(),
        ] {
            builder
                .create(&dir)
                .map_err(|e| RuntimeError::io(format!("cannot create {}", dir.display()), e))?;
        }
        Ok(paths)
    }

    /// The state directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The SQLite database file.
    pub fn database(&self) -> PathBuf {
        self.root.join("subzero.db")
    }

    /// The directory holding every lock file.
    pub fn locks_dir(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// The per-child lock file.
    pub fn child_lock(&self, child: ChildId) -> PathBuf {
        self.locks_dir()
            .join("children")
            .join(format!("{child}.lock"))
    }

    /// A per-workspace slot lock file.
    pub fn slot_lock(&self, scope_key: &str, kind: &str, index: u32) -> PathBuf {
        self.locks_dir()
            .join("slots")
            .join(format!("{scope_key}.{kind}.{index}.lock"))
    }

    /// A broker instance's liveness lock file.
    pub fn owner_lock(&self, token: &str) -> PathBuf {
        self.locks_dir()
            .join("owners")
            .join(format!("{token}.lock"))
    }

    /// The directory holding artifact files, one subdirectory per child.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.root.join("artifacts")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_env_beats_xdg_beats_home() {
        let env = PathEnv {
            subzero_state_dir: Some("/env/state".into()),
            xdg_state_home: Some("/xdg".into()),
            home: Some("/home/u".into()),
            ..PathEnv::default()
        };
        let flag = resolve_state_dir(Some(Path::new("/flag")), &env);
        assert_eq!(flag.ok(), Some(PathBuf::from("/flag")));
        assert_eq!(
            resolve_state_dir(None, &env).ok(),
            Some(PathBuf::from("/env/state"))
        );
        let env = PathEnv {
            subzero_state_dir: None,
            ..env
        };
        assert_eq!(
            resolve_state_dir(None, &env).ok(),
            Some(PathBuf::from("/xdg/subzero"))
        );
        let env = PathEnv {
            xdg_state_home: Some("relative".into()),
            ..env
        };
        assert_eq!(
            resolve_state_dir(None, &env).ok(),
            Some(PathBuf::from("/home/u/.local/state/subzero"))
        );
        assert_eq!(
            resolve_config_path(None, &env).ok(),
            Some(PathBuf::from("/home/u/.config/subzero/config.toml"))
        );
    }

    #[test]
    fn no_home_asks_for_the_flag() {
        let err = resolve_state_dir(None, &PathEnv::default()).err();
        assert!(err.is_some_and(|e| e.to_string().contains("--state-dir")));
    }
}
