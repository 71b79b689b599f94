//! The process table as `/proc` lists it: the pids, and the fields of one process's `stat`
//! line the broker and the worker read (state, parent, process group, start time).

use std::path::PathBuf;

/// Every pid `/proc` lists now, with its directory (empty when `/proc` cannot be read).
pub fn pids() -> impl Iterator<Item = (u32, PathBuf)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((pid, entry.path()))
        })
}

/// The fields of `/proc/<pid>/stat` that say where a process stands in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: `R`, `S`, `Z` (zombie), `X` (dead), …
    pub state: char,
    /// Field 4: the parent's pid.
    pub ppid: i32,
    /// Field 5: the process group.
    pub pgid: i32,
    /// Field 22: the start time in clock ticks after boot; `None` on a line cut short.
    pub start: Option<u64>,
}

impl Stat {
    /// The `stat` line of `pid` now, or `None` when it is gone (or unreadable).
    pub fn of(pid: u32) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// When `pid` started (clock ticks after boot), as every process reads it: from the
    /// `stat` of its thread-group leader's task entry. An emulator (qemu-user) rewrites a
    /// process's own `/proc/<pid>/stat` with a start time of its making, so that one reads
    /// differently from inside and outside; the task entry it passes through.
    pub fn start_of(pid: u32) -> Option<u64> {
        let line = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat")).ok()?;
        Stat::parse(&line)?.start
    }

    /// Parses a `stat` line. The command name is in parentheses and may hold spaces and
    /// parentheses itself, so the fields are read after the *last* `)`.
    pub fn parse(stat: &str) -> Option<Stat> {
        let mut fields = stat[stat.rfind(')')? + 1..].split_ascii_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        let pgid = fields.next()?.parse().ok()?;
        let start = fields.nth(16).and_then(|s| s.parse().ok());
        Some(Stat {
            state,
            ppid,
            pgid,
            start,
        })
    }

    /// Whether it is a zombie or dead: it holds no descriptor and runs nothing.
    pub fn is_gone(&self) -> bool {
        self.state == 'Z' || self.state == 'X'
    }
}

#[cfg(test)]
mod tests {
    use super::Stat;

    #[test]
    fn this_process_is_listed() {
        let me = std::process::id();
        assert!(super::pids().any(|(pid, dir)| pid == me && dir.ends_with(me.to_string())));
    }

    #[test]
    fn a_process_starts_when_its_stat_and_its_leaders_task_entry_say() {
        let me = std::process::id();
        let start = Stat::start_of(me).expect("own task entry");
        assert_eq!(Some(start), Stat::of(me).expect("own stat").start);
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let theirs = Stat::start_of(child.id()).expect("the child's task entry");
        assert!(theirs >= start, "{theirs} < {start}");
        assert_eq!(Some(theirs), Stat::of(child.id()).and_then(|s| s.start));
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(Stat::start_of(u32::MAX), None);
    }

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(
            Stat::parse(line),
            Some(Stat {
                state: 'S',
                ppid: 17,
                pgid: 4242,
                start: Some(987654),
            })
        );
        let short = Stat::parse("1 (x) Z 0 1 1 0").expect("short");
        assert_eq!(short.start, None, "too short for a start time");
        assert!(short.is_gone());
        assert_eq!(Stat::parse("1 (x) Z 0"), None);
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let line = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 0";
        let stat = Stat::parse(line).expect("stat");
        assert_eq!((stat.state, stat.ppid, stat.pgid), ('S', 17, 4242));
    }

    #[test]
    fn stat_with_parentheses_in_the_name_parses() {
        let stat = Stat::parse("123 (we ird) name)) S 45 123 123 0 -1").expect("stat");
        assert_eq!((stat.state, stat.ppid), ('S', 45));
    }

    #[test]
    fn the_start_time_is_field_22_even_with_parentheses_in_the_name() {
        let stat = "77 (a) (b)) S 1 77 77 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1 2";
        assert_eq!(Stat::parse(stat).and_then(|s| s.start), Some(987654));
    }

    #[test]
    fn this_process_shows_its_own_start_time() {
        let me = Stat::of(std::process::id()).expect("own stat");
        assert!(me.start.is_some_and(|s| s > 0));
        assert!(!me.is_gone());
    }
}
