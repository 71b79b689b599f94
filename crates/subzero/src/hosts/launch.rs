//! The command line a host runs to start `subzero mcp`, resolved from the flags: the binary
//! (or `npx` and the npm launcher), the workspace (project scope) and the Subzero config, as
//! clean absolute UTF-8 paths so the same target always yields the same entry.

use std::path::{Path, PathBuf};

use super::{EntryArgs, HostEnv, HostsError, Scope};

/// The npm launcher package `--npx` runs (`packaging/npm/subzero-mcp`, named in `server.json`).
pub(super) const NPM_PACKAGE: &str = "subzero-mcp";

/// The command line the host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Launch {
    pub(super) command: String,
    /// Everything after `command`: [`Launch::lead`], then `mcp` and its flags.
    pub(super) args: Vec<String>,
    /// The arguments that make `command` a `subzero` (`-y subzero-mcp@0.1.0` after `npx`;
    /// none for the binary itself): a `subzero wait` runs as `command lead… wait …`.
    pub(super) lead: Vec<String>,
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

/// `npx -y subzero-mcp@<version>`, pinned to this binary's own version: the host then runs
/// the very build the user installed (and tested) this with, not whatever npm has newest.
fn npx_lead() -> Vec<String> {
    let package = format!("{NPM_PACKAGE}@{}", env!("CARGO_PKG_VERSION"));
    vec!["-y".to_owned(), package]
}

pub(super) fn resolve(env: &HostEnv, entry: &EntryArgs) -> Result<Resolved, HostsError> {
    let (command, lead) = if entry.npx {
        ("npx".to_owned(), npx_lead())
    } else {
        let binary = match &entry.binary {
            Some(path) => absolute(env, path),
            None => env
                .current_exe
                .clone()
                .ok_or(HostsError::ExecutableUnknown)?,
        };
        (utf8(&binary)?, Vec::new())
    };
    let workspace = match (&entry.workspace, entry.scope) {
        (Some(dir), _) => Some(existing_dir(&absolute(env, dir))?),
        (None, Scope::Project) => Some(existing_dir(&env.cwd)?),
        (None, Scope::User) => None,
    };
    let mut args = lead.clone();
    args.push("mcp".to_owned());
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
            command,
            args,
            lead,
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

#[cfg(test)]
mod tests {
    use super::super::testkit::{Kit, NPX_PACKAGE};
    use super::*;

    #[test]
    fn npx_runs_the_launcher_at_this_version_then_mcp_with_the_same_flags() {
        let kit = Kit::new();
        let mut entry = kit.entry(Scope::Project);
        entry.npx = true;
        entry.subzero_config = Some(PathBuf::from("sz.toml"));
        let launch = resolve(&kit.env, &entry).expect("resolves").launch;
        let config = format!("{}/sz.toml", kit.workspace_str());
        let mut args = kit.npx_args();
        args.extend(["--config".to_owned(), config]);
        assert_eq!(
            launch,
            Launch {
                command: "npx".to_owned(),
                args,
                lead: vec!["-y".to_owned(), NPX_PACKAGE.to_owned()],
            }
        );
        assert_eq!(
            NPX_PACKAGE,
            format!("subzero-mcp@{}", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn the_binary_needs_no_lead() {
        let kit = Kit::new();
        let launch = resolve(&kit.env, &kit.entry(Scope::User))
            .expect("resolves")
            .launch;
        assert_eq!(launch.args, ["mcp"]);
        assert!(launch.lead.is_empty());
    }
}
