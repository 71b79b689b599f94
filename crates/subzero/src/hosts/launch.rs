//! The command line a host runs to start `subzero mcp`, resolved from the flags: the binary,
//! the workspace (project scope) and the Subzero config, as clean absolute UTF-8 paths so the
//! same target always yields the same entry.

use std::path::{Path, PathBuf};

use super::{EntryArgs, HostEnv, HostsError, Scope};

/// The command line the host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Launch {
    pub(super) command: String,
    pub(super) args: Vec<String>,
}

impl Launch {
    /// `command` followed by `args`, for hosts that take one array.
    pub(super) fn argv(&self) -> Vec<String> {
        std::iter::once(self.command.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// The resolved facts of one `print`/`install`.
#[derive(Debug)]
pub(super) struct Resolved {
    pub(super) launch: Launch,
    /// The project directory: the workspace for project scope.
    pub(super) project_dir: PathBuf,
}

pub(super) fn resolve(env: &HostEnv, entry: &EntryArgs) -> Result<Resolved, HostsError> {
    let binary = match &entry.binary {
        Some(path) => absolute(env, path),
        None => env
            .current_exe
            .clone()
            .ok_or(HostsError::ExecutableUnknown)?,
    };
    let workspace = match (&entry.workspace, entry.scope) {
        (Some(dir), _) => Some(existing_dir(&absolute(env, dir))?),
        (None, Scope::Project) => Some(existing_dir(&env.cwd)?),
        (None, Scope::User) => None,
    };
    let mut args = vec!["mcp".to_owned()];
    if let Some(dir) = &workspace {
        args.push("--workspace".to_owned());
        args.push(utf8(dir)?);
    }
    if let Some(file) = &entry.subzero_config {
        args.push("--config".to_owned());
        args.push(utf8(&absolute(env, file))?);
    }
    Ok(Resolved {
        launch: Launch {
            command: utf8(&binary)?,
            args,
        },
        project_dir: workspace.unwrap_or_else(|| env.cwd.clone()),
    })
}

/// Relative paths are taken from `env.cwd`; existing paths are canonicalized and others cleaned
/// of `.`/`..` so that the same target always yields the same entry (keeping `install`
/// idempotent).
fn absolute(env: &HostEnv, path: &Path) -> PathBuf {
    let joined = env.cwd.join(path);
    std::fs::canonicalize(&joined).unwrap_or_else(|_| normalize_lexically(&joined))
}

fn normalize_lexically(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

fn existing_dir(path: &Path) -> Result<PathBuf, HostsError> {
    match std::fs::canonicalize(path) {
        Ok(dir) if dir.is_dir() => Ok(dir),
        _ => Err(HostsError::WorkspaceNotADirectory {
            path: path.to_path_buf(),
        }),
    }
}

pub(super) fn utf8(path: &Path) -> Result<String, HostsError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| HostsError::NonUtf8Path {
            path: path.to_path_buf(),
        })
}
