//! Where this process's cgroup is: its path from `/proc/self/cgroup` below the mount that
//! shows it in `/proc/self/mountinfo` — the `cgroup2` hierarchy ([`own_v2_dir`]), or the
//! cgroup v1 hierarchy of one controller ([`own_v1_dir`]).

use std::path::PathBuf;

/// This process's cgroup v2 directory, read from `/proc/self`; the error says why there is
/// none.
pub fn own_v2() -> Result<PathBuf, String> {
    let (mountinfo, membership) = read_self()?;
    own_v2_dir(&mountinfo, &membership)
}

/// `/proc/self/mountinfo` and `/proc/self/cgroup`.
pub fn read_self() -> Result<(String, String), String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let membership = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    Ok((mountinfo, membership))
}

/// The cgroup v2 directory of the process whose `/proc/<pid>/mountinfo` and
/// `/proc/<pid>/cgroup` these are: the `0::` path below the `cgroup2` mount whose root
/// contains it.
pub fn own_v2_dir(mountinfo: &str, membership: &str) -> Result<PathBuf, String> {
    let path = membership
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or_else(|| {
            "this process is in no cgroup v2 hierarchy (no `0::` line in /proc/self/cgroup)"
                .to_owned()
        })?;
    if path.contains("(deleted)") || path.starts_with("/..") {
        return Err(format!(
            "this process's cgroup v2 path {path:?} is outside the visible hierarchy"
        ));
    }
    let mut mounted = false;
    for (kind, _, fields) in mounts(mountinfo) {
        if kind != "cgroup2" {
            continue;
        }
        mounted = true;
        if let Some(dir) = below_mount(&fields, path) {
            return Ok(dir);
        }
    }
    Err(if mounted {
        format!("no cgroup2 mount shows this process's cgroup {path:?}")
    } else {
        "no cgroup v2 hierarchy is mounted (no cgroup2 line in /proc/self/mountinfo)".to_owned()
    })
}

/// This process's cgroup directory in the v1 hierarchy of `controller`, when one is
/// mounted and shows it.
pub fn own_v1_dir(mountinfo: &str, membership: &str, controller: &str) -> Option<PathBuf> {
    let path = membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })?;
    mounts(mountinfo)
        .filter(|(kind, options, _)| {
            *kind == "cgroup" && options.split(',').any(|o| o == controller)
        })
        .find_map(|(_, _, fields)| below_mount(&fields, path))
}

/// Each mountinfo line as (file system type, super options, the fields before ` - `).
fn mounts(mountinfo: &str) -> impl Iterator<Item = (&str, &str, Vec<&str>)> {
    mountinfo.lines().filter_map(|line| {
        let (fields, tail) = line.split_once(" - ")?;
        let mut tail = tail.split_whitespace();
        let kind = tail.next()?;
        let options = tail.nth(1).unwrap_or_default();
        Some((kind, options, fields.split_whitespace().collect()))
    })
}

/// Where the cgroup `path` lies below the mount whose mountinfo fields these are (field 4
/// its root, field 5 its mount point), when the mount's root contains it.
fn below_mount(fields: &[&str], path: &str) -> Option<PathBuf> {
    let (root, point) = (*fields.get(3)?, *fields.get(4)?);
    let below = if root == "/" {
        path
    } else {
        path.strip_prefix(root)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))?
    };
    let mut dir = PathBuf::from(unescape(point));
    for part in below.split('/').filter(|p| !p.is_empty()) {
        dir.push(part);
    }
    Some(dir)
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn the_own_cgroup_is_found_below_the_cgroup2_mount() {
        let membership = "4:memory:/x\n0::/user.slice/app.scope\n";
        assert_eq!(
            own_v2_dir(HYBRID, membership),
            Ok(PathBuf::from("/sys/fs/cgroup/unified/user.slice/app.scope"))
        );
        assert_eq!(
            own_v2_dir(HYBRID, "0::/\n"),
            Ok(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn a_bind_mounted_subtree_and_an_escaped_mount_point_resolve() {
        let mountinfo = "50 1 0:38 /user.slice /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_v2_dir(mountinfo, "0::/user.slice/a\n"),
            Ok(PathBuf::from("/mnt/my cgroups/a"))
        );
        assert!(own_v2_dir(mountinfo, "0::/system.slice/a\n").is_err());
    }

    #[test]
    fn without_cgroup2_or_a_0_line_there_is_no_cgroup_and_the_reason_says_which() {
        let v1_only = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let err = own_v2_dir(v1_only, "0::/\n").expect_err("no cgroup2");
        assert!(err.contains("no cgroup v2 hierarchy is mounted"), "{err}");
        let err = own_v2_dir(HYBRID, "4:memory:/x\n").expect_err("no 0:: line");
        assert!(err.contains("`0::`"), "{err}");
    }

    #[test]
    fn the_own_v1_cgroup_of_each_controller_is_found() {
        let membership = "8:pids:/\n4:memory:/process_api/abc\n0::/\n";
        assert_eq!(
            own_v1_dir(HYBRID, membership, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        assert_eq!(
            own_v1_dir(HYBRID, membership, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))
        );
    }

    #[test]
    fn a_pure_v2_machine_has_no_v1_limit_hierarchy() {
        let v2 = "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(own_v1_dir(v2, "0::/user.slice\n", "pids"), None);
        assert_eq!(own_v1_dir(HYBRID, "0::/\n", "pids"), None);
    }
}
