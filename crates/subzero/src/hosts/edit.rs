//! Applying a planned change to a host file: diff for `--dry-run`, backup before a change,
//! atomic replace, and nothing at all when the text is already right.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::HostsError;

/// What [`apply`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The file already had the entry; nothing was written.
    Unchanged,
    /// The diff was printed; nothing was written.
    DryRun,
    /// The file did not exist and was created (no backup needed).
    Created,
    /// The file was replaced after copying the previous bytes to `backup`.
    Updated { backup: PathBuf },
}

/// Follows a symlinked config file (dotfile managers) so that the link survives the rename.
pub(super) fn resolve_symlink(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// The file's text, or `None` when it does not exist yet.
pub(super) fn read_optional(path: &Path) -> Result<Option<String>, HostsError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HostsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `updated` to `path` unless it equals `original` or `dry_run` is set.
pub(super) fn apply(
    path: &Path,
    original: Option<&str>,
    updated: &str,
    dry_run: bool,
    now: SystemTime,
    out: &mut dyn Write,
) -> Result<Outcome, HostsError> {
    if original == Some(updated) {
        return Ok(Outcome::Unchanged);
    }
    if dry_run {
        let diff = unified_diff(path, original.unwrap_or(""), updated, original.is_none());
        out.write_all(diff.as_bytes()).map_err(HostsError::Output)?;
        return Ok(Outcome::DryRun);
    }
    let outcome = match original {
        None => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(|source| HostsError::Write {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
            Outcome::Created
        }
        Some(_) => Outcome::Updated {
            backup: back_up(path, now)?,
        },
    };
    replace_atomically(path, updated)?;
    Ok(outcome)
}

/// A unified diff of the change, headed with the file's path.
pub(super) fn unified_diff(path: &Path, old: &str, new: &str, is_new_file: bool) -> String {
    let shown = path.display().to_string();
    let old_header = if is_new_file {
        "/dev/null".to_owned()
    } else {
        format!("{shown} (current)")
    };
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &format!("{shown} (after install)"))
        .to_string()
}

/// Copies `path` to `<path>.bak.<UTC timestamp>` (with `.N` added if that name is taken).
fn back_up(path: &Path, now: SystemTime) -> Result<PathBuf, HostsError> {
    let stamp = utc_stamp(now);
    let base = format!("{}.bak.{stamp}", path.display());
    let mut backup = PathBuf::from(&base);
    let mut n = 1;
    while fs::symlink_metadata(&backup).is_ok() {
        backup = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    fs::copy(path, &backup).map_err(|source| HostsError::Backup {
        path: path.to_path_buf(),
        backup: backup.clone(),
        source,
    })?;
    Ok(backup)
}

/// Writes a sibling temporary file, syncs it, keeps the old file's permissions, then renames it
/// over `path`, so a crash leaves either the old or the new file, never half of one.
fn replace_atomically(path: &Path, text: &str) -> Result<(), HostsError> {
    let write_err = |source| HostsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".to_owned());
    let temp = path.with_file_name(format!(".{file_name}.subzero-{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        if let Ok(meta) = fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and useless now.
        let _ = fs::remove_file(&temp);
    }
    result.map_err(write_err)
}

/// `YYYYMMDDTHHMMSSZ` for `now` (UTC): the wire timestamp without separators or
/// milliseconds, safe in a file name.
pub(super) fn utc_stamp(now: SystemTime) -> String {
    let wire = subzero_protocol::timestamp::rfc3339_millis(now);
    let mut stamp: String = wire[..19]
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    stamp.push('Z');
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn stamps_are_utc_calendar_times() {
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101T000000Z");
        // 2026-11-29T20:11:23Z
        let t = UNIX_EPOCH + Duration::from_secs(1_795_983_083);
        assert_eq!(utc_stamp(t), "20261129T201123Z");
        // a leap day
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_stamp(t), "20000229T000000Z");
    }

    #[test]
    fn unchanged_text_writes_nothing_and_makes_no_backup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.toml");
        fs::write(&path, "a = 1\n").expect("write");
        let outcome = apply(
            &path,
            Some("a = 1\n"),
            "a = 1\n",
            false,
            UNIX_EPOCH,
            &mut Vec::new(),
        )
        .expect("applies");
        assert_eq!(outcome, Outcome::Unchanged);
        assert_eq!(fs::read_dir(dir.path()).expect("list").count(), 1);
    }

    #[test]
    fn second_backup_in_the_same_second_gets_a_suffix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.toml");
        fs::write(&path, "a = 1\n").expect("write");
        let first = back_up(&path, UNIX_EPOCH).expect("first");
        let second = back_up(&path, UNIX_EPOCH).expect("second");
        assert_ne!(first, second);
        assert!(
            second
                .to_string_lossy()
                .ends_with(".bak.19700101T000000Z.1")
        );
    }

    #[cfg(unix)]
    #[test]
    fn replacing_keeps_permissions_and_symlinks() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real.json");
        fs::write(&real, "{}\n").expect("write");
        fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).expect("chmod");
        let link = dir.path().join("link.json");
        symlink(&real, &link).expect("symlink");
        let target = resolve_symlink(&link);
        apply(
            &target,
            Some("{}\n"),
            "{\"a\": 1}\n",
            false,
            UNIX_EPOCH,
            &mut Vec::new(),
        )
        .expect("applies");
        assert!(
            fs::symlink_metadata(&link)
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&link).expect("read"), "{\"a\": 1}\n");
        let mode = fs::metadata(&real).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
