//! The state directory: permissions, database, lock directory and held child locks.
//! Nothing here writes: no directory or database is created, no child lock is taken.
//! Whether a broker is alive is read from its owner lock, probed the way recovery probes
//! it, never from `/proc`: brokers and workers are non-dumpable, so their descriptors are
//! invisible to a doctor that is not root.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::OpenFlags;
use subzero_runtime::store::SCHEMA_VERSION;

use super::report::Check;

/// Where a state directory keeps things (mirrors `StatePaths`, which creates them).
struct Layout<'a> {
    root: &'a Path,
}

impl Layout<'_> {
    fn database(&self) -> PathBuf {
        self.root.join("subzero.db")
    }
    fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }
    fn child_locks(&self) -> PathBuf {
        self.locks().join("children")
    }
    fn owner_lock(&self, token: &str) -> PathBuf {
        self.locks().join("owners").join(format!("{token}.lock"))
    }
}

/// Every check of the state directory. When it does not exist yet, says so once.
pub fn check_state(root: &Path) -> Vec<Check> {
    let layout = Layout { root };
    let dir = check_dir(root);
    if !root.exists() {
        return vec![dir];
    }
    let mut checks = vec![dir, check_database(&layout.database())];
    checks.push(check_lock_dirs(&layout));
    checks.extend(check_held_locks(&layout));
    checks
}

fn check_dir(root: &Path) -> Check {
    let shown = root.display();
    let meta = match std::fs::metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::warn(
                "state dir",
                format!("{shown} does not exist yet"),
                "nothing to check: the first `subzero mcp` creates it (mode 0700); pass --state-dir if your host uses another one",
            );
        }
        Err(e) => {
            return Check::fail(
                "state dir",
                format!("{shown} cannot be read: {e}"),
                format!("make {shown} readable by you, or pass --state-dir"),
            );
        }
    };
    if !meta.is_dir() {
        return Check::fail(
            "state dir",
            format!("{shown} is not a directory"),
            format!("move {shown} away or pass --state-dir DIR"),
        );
    }
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return Check::fail(
            "state dir",
            format!(
                "{shown} is owned by uid {}, not by you (uid {uid})",
                meta.uid()
            ),
            format!("chown -R {uid} {shown}, or use a state dir of your own (--state-dir)"),
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Check::fail(
            "state dir",
            format!("{shown} has mode {mode:04o}; other users can read children's results"),
            format!("chmod 700 {shown}"),
        );
    }
    Check::pass("state dir", format!("{shown} (mode {mode:04o}, yours)"))
}

fn check_database(path: &Path) -> Check {
    let shown = path.display();
    if !path.exists() {
        return Check::warn(
            "database",
            format!("{shown} does not exist yet"),
            "the first `subzero mcp` creates it; nothing to do",
        );
    }
    match inspect_database(path) {
        Ok((integrity, version, journal)) => {
            if integrity != "ok" {
                return Check::fail(
                    "database",
                    format!("{shown}: integrity check failed: {integrity}"),
                    format!(
                        "stop every `subzero mcp`, keep a copy of {shown}, then recover it (sqlite3 {shown} .recover) or move it away to start empty"
                    ),
                );
            }
            match version.cmp(&SCHEMA_VERSION) {
                std::cmp::Ordering::Greater => Check::fail(
                    "database",
                    format!(
                        "{shown}: schema version {version} is newer than this subzero ({SCHEMA_VERSION})"
                    ),
                    "use the subzero that wrote it (check `which -a subzero`), or upgrade",
                ),
                std::cmp::Ordering::Less => Check::warn(
                    "database",
                    format!(
                        "{shown}: schema version {version}, this subzero writes {SCHEMA_VERSION}"
                    ),
                    "the next `subzero mcp` migrates it; nothing else to do",
                ),
                std::cmp::Ordering::Equal => Check::pass(
                    "database",
                    format!("{shown}: quick_check ok, schema version {version}, journal {journal}"),
                ),
            }
        }
        Err(e) => Check::fail(
            "database",
            format!("{shown} cannot be read: {e}"),
            format!(
                "check that {shown} is a file you own (mode 0600) and not a leftover of another program; move it away to start empty"
            ),
        ),
    }
}

/// `(quick_check result, user_version, journal_mode)` through a read-only connection.
fn inspect_database(path: &Path) -> rusqlite::Result<(String, i64, String)> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let mut stmt = conn.prepare("PRAGMA quick_check")?;
    let problems = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    Ok((problems.join("; "), version, journal))
}

/// The lock directories must be writable. Missing ones are no failure: every
/// `subzero mcp` creates them at start, so only the directory that would hold them has to
/// be writable.
fn check_lock_dirs(layout: &Layout<'_>) -> Check {
    let locks = layout.locks();
    let dirs = ["", "children", "slots", "owners"].map(|d| locks.join(d));
    let mut missing = Vec::new();
    let mut broken = Vec::new();
    for dir in &dirs {
        match writable(dir) {
            Ok(()) => {}
            Err(rustix::io::Errno::NOENT) => missing.push(dir.display().to_string()),
            Err(e) => broken.push(format!("{} ({e})", dir.display())),
        }
    }
    if !broken.is_empty() {
        return Check::fail(
            "lock dir",
            format!("not writable: {}", broken.join(", ")),
            format!(
                "make them directories you own with mode 0700 (`chmod 700 …`, or move a file in the way aside); missing ones are created by the next `subzero mcp`: `mkdir -p -m 700 {}/{{children,slots,owners}}`",
                locks.display()
            ),
        );
    }
    if missing.is_empty() {
        return Check::pass("lock dir", format!("{} writable", locks.display()));
    }
    // `subzero mcp` creates what is missing inside the nearest directory that exists.
    let holder = if writable(&locks).is_err() {
        layout.root
    } else {
        locks.as_path()
    };
    match writable(holder) {
        Ok(()) => Check::pass(
            "lock dir",
            format!(
                "{} not there yet: will be created by `subzero mcp` (mode 0700) when it starts",
                missing.join(", ")
            ),
        ),
        Err(e) => Check::fail(
            "lock dir",
            format!(
                "{} cannot be created: {} is not writable ({e})",
                missing.join(", "),
                holder.display()
            ),
            format!("chmod 700 {} (owned by you)", holder.display()),
        ),
    }
}

/// Whether this user may create entries in `dir` (write and search permission).
fn writable(dir: &Path) -> rustix::io::Result<()> {
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
}

/// Each child lock file that some process keeps open, with its holders and whether a
/// live broker owns the child. Found by one scan of `/proc/*/fd`; no lock is taken, so
/// doctor never makes a broker's claim fail. Unless doctor runs as root, a lock held only
/// by a (non-dumpable) worker is not seen; its exec'd tool processes are.
fn check_held_locks(layout: &Layout<'_>) -> Vec<Check> {
    let dir = layout.child_locks();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut locks: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(child) = name.strip_suffix(".lock") else {
            continue;
        };
        if let Ok(meta) = entry.metadata() {
            locks.insert(child.to_owned(), (meta.dev(), meta.ino()));
        }
    }
    let holders = subzero_runtime::locks::holders_by_inode(locks.values().copied().collect());
    let ownership = Ownership::read(&layout.database());
    let mut checks = Vec::new();
    for (child, inode) in &locks {
        let Some(held) = holders.get(inode) else {
            continue;
        };
        let pids: Vec<String> = held
            .iter()
            .map(|h| {
                format!(
                    "pid {} ({})",
                    h.pid,
                    if h.command.is_empty() {
                        "?"
                    } else {
                        &h.command
                    }
                )
            })
            .collect();
        let label = format!("child lock {child}");
        let held_by = format!("held by {}", pids.join(", "));
        match ownership.broker_of(child, layout) {
            Some(Owner::Alive {
                token,
                pids: brokers,
            }) => checks.push(Check::pass(
                label,
                format!(
                    "{held_by}; owned by running broker {token} ({})",
                    if brokers.is_empty() {
                        "pid not visible: brokers are non-dumpable".to_owned()
                    } else {
                        format!("pid {}", brokers.join(", "))
                    }
                ),
            )),
            owner => {
                let why = match owner {
                    Some(Owner::Gone { token }) => format!("its broker {token} is gone"),
                    _ => "no broker owns it".to_owned(),
                };
                let kill: Vec<String> = held.iter().map(|h| h.pid.to_string()).collect();
                checks.push(Check::warn(
                    label,
                    format!("{held_by}; {why}, so the child stays recovery_required while they run"),
                    format!(
                        "these processes outlived their broker and Subzero never kills what it does not own: stop them (`kill {}`), then call subzero_resume on the child",
                        kill.join(" ")
                    ),
                ));
            }
        }
    }
    if checks.is_empty() {
        checks.push(Check::pass(
            "child locks",
            format!("no child lock is held ({} lock file(s))", locks.len()),
        ));
    }
    checks
}

/// Who the database says owns each child (read-only; empty when unreadable).
struct Ownership {
    owners: HashMap<String, String>,
}

enum Owner {
    Alive { token: String, pids: Vec<String> },
    Gone { token: String },
}

impl Ownership {
    fn read(database: &Path) -> Ownership {
        let read = || -> rusqlite::Result<HashMap<String, String>> {
            let conn = rusqlite::Connection::open_with_flags(
                database,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            let mut stmt = conn.prepare(
                "SELECT child_id, owner_token FROM children WHERE ownership = ?1 AND owner_token IS NOT NULL",
            )?;
            let rows = stmt
                .query_map([subzero_core::Ownership::Owned.as_str()], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok(rows)
        };
        let owners = if database.exists() {
            read().unwrap_or_default()
        } else {
            HashMap::new()
        };
        Ownership { owners }
    }

    fn broker_of(&self, child: &str, layout: &Layout<'_>) -> Option<Owner> {
        let token = self.owners.get(child)?.clone();
        let valid = token.len() <= 64
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Some(Owner::Gone { token });
        }
        let lock = layout.owner_lock(&token);
        let holders = || subzero_runtime::locks::holders(&lock);
        let alive = match lock
            .exists()
            .then(|| subzero_runtime::locks::is_free(&lock))
        {
            None => false,
            Some(Ok(free)) => !free,
            // The probe failed: fall back to what /proc shows.
            Some(Err(_)) => !holders().is_empty(),
        };
        if alive {
            let pids = holders().iter().map(|h| h.pid.to_string()).collect();
            Some(Owner::Alive { token, pids })
        } else {
            Some(Owner::Gone { token })
        }
    }
}
