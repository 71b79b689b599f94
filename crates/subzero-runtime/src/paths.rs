//! Where state and configuration live.
//!
//! Resolution is a pure function of explicit inputs (the CLI flag and an environment
//! snapshot), so tests never touch the process environment. Precedence: flag, then
//! `SUBZERO_STATE_DIR` / `SUBZERO_CONFIG`, then the XDG base directory (only when it is
//! absolute, as the XDG spec requires), then `$HOME`.

use std::ffi::OsString;
use std::fs::DirBuilder;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
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

/// What no tool process may see (passed to every worker as `--hide`): the state
/// directory (database, locks, transcripts, artifacts, other workers' scratch), the
/// configuration file — and its directory when that is Subzero's own (named `subzero`, as
/// the default `~/.config/subzero/` is: a custom `--config /some/project/x.toml` hides
/// only the file) — and every `file =` credential.
pub fn hidden_from_tools(
    state_dir: &Path,
    config_path: &Path,
    key_files: impl IntoIterator<Item = PathBuf>,
) -> Vec<PathBuf> {
    let mut hidden = vec![state_dir.to_path_buf(), config_path.to_path_buf()];
    if let Some(dir) = config_path
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "subzero"))
    {
        hidden.push(dir.to_path_buf());
    }
    hidden.extend(key_files);
    hidden
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
    ///
    /// `scratch/`, where workers keep raw tool output, is never taken on trust: it must be a
    /// real directory owned by this user. A link or other non-directory in its place is
    /// removed (never followed) and replaced, a wrong mode is set back to 0700, and a
    /// directory owned by someone else is refused with an error naming it.
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
                .map_err(|e| RuntimeError::io_at("cannot create", &dir, e))?;
        }
        private_subdir(&paths.root, SCRATCH)?;
        Ok(paths)
    }

    /// Name the layout of `root` without creating or checking anything: for readers
    /// (`subzero ls`, `show`, …) that must never write to a state directory.
    pub fn existing(root: impl Into<PathBuf>) -> Self {
        StatePaths { root: root.into() }
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

    /// The parent of every worker's private scratch directory (one fresh, flock-held
    /// directory per live worker; a dead worker's is reclaimed at the next broker start).
    pub fn scratch_dir(&self) -> PathBuf {
        self.root.join(SCRATCH)
    }

    /// Where isolated children's checkouts live: beside the state directory
    /// (`<state>-checkouts`), not in it, because every tool process has the state directory
    /// hidden and a child works in its checkout.
    pub fn checkouts_dir(&self) -> PathBuf {
        let mut name = self.root.file_name().unwrap_or_default().to_os_string();
        name.push("-checkouts");
        self.root.with_file_name(name)
    }
}

/// The state directory's entry holding the workers' scratch directories.
const SCRATCH: &str = "scratch";

/// Makes `parent/name` a directory of ours with mode 0700 without following a link there.
fn private_subdir(parent: &Path, name: &str) -> RuntimeResult<()> {
    let path = parent.join(name);
    let failed = |e: io::Error| RuntimeError::io_at("cannot create", &path, e);
    let parent_fd = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failed(e.into()))?;
    // A second round only after replacing what was there; a third means someone races us.
    for _ in 0..3 {
        match rustix::fs::mkdirat(&parent_fd, name, Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(failed(e.into())),
        }
        match rustix::fs::openat(
            &parent_fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(dir) => return make_private(&dir, &path),
            Err(Errno::LOOP | Errno::NOTDIR) => {
                tracing::warn!(
                    path = %path.display(),
                    "replacing a link or file found where the scratch directory belongs; its target is left alone"
                );
                match rustix::fs::unlinkat(&parent_fd, name, AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(failed(e.into())),
                }
            }
            Err(Errno::NOENT) => {}
            Err(e) => return Err(failed(e.into())),
        }
    }
    Err(failed(io::Error::other(
        "it was replaced again while being created; check what else writes to the state directory",
    )))
}

/// Refuses a directory someone else owns; sets a wrong mode back to 0700.
fn make_private(dir: &OwnedFd, path: &Path) -> RuntimeResult<()> {
    let refused = |e: io::Error| RuntimeError::io(format!("refusing to use {}", path.display()), e);
    let stat = rustix::fs::fstat(dir).map_err(|e| refused(e.into()))?;
    let euid = rustix::process::geteuid().as_raw();
    if stat.st_uid != euid {
        return Err(refused(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "it is owned by uid {}, not by this user (uid {euid}); remove it or use another state directory",
                stat.st_uid
            ),
        )));
    }
    let mode = stat.st_mode & 0o7777;
    if mode != 0o700 {
        tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "setting the scratch directory back to mode 0700");
        rustix::fs::fchmod(dir, Mode::RWXU).map_err(|e| refused(e.into()))?;
    }
    Ok(())
}

#[cfg(test)]
mod hidden_tests {
    use super::*;

    #[test]
    fn the_config_directory_is_hidden_only_when_it_is_subzeros_own() {
        let default = hidden_from_tools(
            Path::new("/s"),
            Path::new("/home/u/.config/subzero/config.toml"),
            [PathBuf::from("/keys/k")],
        );
        assert_eq!(
            default,
            [
                "/s",
                "/home/u/.config/subzero/config.toml",
                "/home/u/.config/subzero",
                "/keys/k"
            ]
            .map(PathBuf::from)
        );
        let custom = hidden_from_tools(Path::new("/s"), Path::new("/proj/x.toml"), []);
        assert_eq!(custom, ["/s", "/proj/x.toml"].map(PathBuf::from));
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
    fn a_planted_scratch_link_is_replaced_and_its_target_left_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::create_dir(&victim).expect("victim");
        std::fs::write(victim.join("keep.txt"), "keep").expect("seed");
        let victim_mode = std::fs::metadata(&victim).map(|m| m.mode()).expect("stat");
        let root = dir.path().join("state");
        std::fs::create_dir(&root).expect("state");
        std::os::unix::fs::symlink(&victim, root.join("scratch")).expect("plant");
        let paths = StatePaths::create(&root).expect("create");
        let meta = std::fs::symlink_metadata(paths.scratch_dir()).expect("lstat");
        assert!(meta.is_dir(), "scratch/ is a real directory");
        assert_eq!(meta.mode() & 0o7777, 0o700);
        assert_eq!(
            std::fs::read_to_string(victim.join("keep.txt"))
                .ok()
                .as_deref(),
            Some("keep")
        );
        assert_eq!(
            std::fs::metadata(&victim).map(|m| m.mode()).ok(),
            Some(victim_mode),
            "the link's target keeps its mode"
        );
        std::fs::set_permissions(paths.scratch_dir(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        StatePaths::create(&root).expect("create again");
        let meta = std::fs::symlink_metadata(paths.scratch_dir()).expect("lstat");
        assert_eq!(meta.mode() & 0o7777, 0o700, "a wrong mode is fixed");
    }

    #[test]
    fn no_home_asks_for_the_flag() {
        let err = resolve_state_dir(None, &PathEnv::default()).err();
        assert!(err.is_some_and(|e| e.to_string().contains("--state-dir")));
    }
}
