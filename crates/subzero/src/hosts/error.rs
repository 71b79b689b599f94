//! [`HostsError`]: everything `subzero hosts` can fail with, each with a stable code.

use std::path::PathBuf;

/// Everything `subzero hosts` can fail with. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("cannot tell where the home directory is (HOME is not set); pass --config-path PATH")]
    HomeUnknown,
    #[error(
        "cannot read the current directory: {0}; run from an existing directory or pass --workspace DIR"
    )]
    CurrentDir(#[source] std::io::Error),
    #[error("cannot determine the path of the subzero executable; pass --binary PATH")]
    ExecutableUnknown,
    #[error("workspace {path} is not an existing directory; create it or pass --workspace DIR")]
    WorkspaceNotADirectory { path: PathBuf },
    #[error(
        "path {path} is not valid UTF-8, which host config files cannot hold; use a UTF-8 path"
    )]
    NonUtf8Path { path: PathBuf },
    #[error("--extension is only for `pi`; `{host}` has no extension file")]
    ExtensionNotForHost { host: &'static str },
    #[error("--{flag} is only for `{for_host}`; leave it out for `{host}`")]
    FlagNotForHost {
        flag: &'static str,
        for_host: &'static str,
        host: &'static str,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot back up {path} to {backup}: {source}; nothing was changed")]
    Backup {
        path: PathBuf,
        backup: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}; the file was left as it was")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not valid TOML ({message}); fix the file, or pass --config-path to edit another one"
    )]
    InvalidToml { path: PathBuf, message: String },
    #[error(
        "{path} is not valid JSON ({message}); fix the file, or pass --config-path to edit another one"
    )]
    InvalidJson { path: PathBuf, message: String },
    #[error(
        "{path} has {what} at line {line} (JSONC); subzero will not rewrite it because that would \
         drop them: add the entry by hand from `subzero hosts print {host}`, or remove the {what}"
    )]
    JsoncNotSupported {
        path: PathBuf,
        line: usize,
        what: &'static str,
        host: &'static str,
    },
    #[error(
        "`{key}` in {path} is {found}, expected {expected}; fix it by hand, then run install again"
    )]
    UnexpectedShape {
        path: PathBuf,
        key: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error(
        "{path} already has a different `subzero` entry:\n{existing}\nwanted:\n{wanted}\nre-run with \
         --force to replace the fields subzero manages (other fields are kept); add --dry-run to \
         see the change first"
    )]
    ConflictingEntry {
        path: PathBuf,
        existing: String,
        wanted: String,
    },
    #[error("cannot write the command output: {0}")]
    Output(#[source] std::io::Error),
}

impl HostsError {
    /// Stable code for scripts and the troubleshooting page.
    pub fn code(&self) -> &'static str {
        match self {
            HostsError::HomeUnknown => "hosts_home_unknown",
            HostsError::CurrentDir(_) => "hosts_current_dir",
            HostsError::ExecutableUnknown => "hosts_executable_unknown",
            HostsError::WorkspaceNotADirectory { .. } => "hosts_workspace_missing",
            HostsError::NonUtf8Path { .. } => "hosts_non_utf8_path",
            HostsError::ExtensionNotForHost { .. } => "hosts_extension_not_for_host",
            HostsError::FlagNotForHost { .. } => "hosts_flag_not_for_host",
            HostsError::Read { .. } => "hosts_read_failed",
            HostsError::Backup { .. } => "hosts_backup_failed",
            HostsError::Write { .. } => "hosts_write_failed",
            HostsError::InvalidToml { .. } => "hosts_invalid_toml",
            HostsError::InvalidJson { .. } => "hosts_invalid_json",
            HostsError::JsoncNotSupported { .. } => "hosts_jsonc_not_supported",
            HostsError::UnexpectedShape { .. } => "hosts_unexpected_shape",
            HostsError::ConflictingEntry { .. } => "hosts_conflicting_entry",
            HostsError::Output(_) => "hosts_output_failed",
        }
    }
}
