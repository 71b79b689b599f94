//! Removing captured secrets from this process's environment, including the copy the
//! kernel shows as `/proc/self/environ`.
//!
//! `/proc/<pid>/environ` does not read libc's `environ` array: it reads the bytes between
//! `env_start` and `env_end`, the block the kernel wrote onto the main thread's stack at
//! exec. Removing a variable (`unsetenv`) only drops its pointer from the array, so its
//! `NAME=value` stays visible there until those bytes are overwritten.
//!
//! Changing the environment is sound only while no other thread can read it, so the scrub
//! first checks that the process runs exactly one thread. Only that thread could start
//! another, and it is busy here until the scrub is done.
#![allow(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use secrecy::SecretString;

/// An environment block larger than this is not believed (Linux caps it far lower).
const MAX_BLOCK: usize = 1 << 32;

/// Why the environment was not scrubbed. Nothing was captured or changed.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    /// Another thread runs, so the environment must not be changed.
    #[error(
        "not_single_threaded: this process runs {threads} threads, and its environment may only be changed while one runs; capture secrets before building the async runtime or starting any thread"
    )]
    NotSingleThreaded {
        /// Threads found in `/proc/self/task`.
        threads: usize,
    },
    /// `/proc/self` could not tell what the scrub needs to know.
    #[error("proc_unreadable: cannot read {what} ({why}); scrubbing the environment needs /proc")]
    ProcUnreadable {
        /// The file or directory.
        what: &'static str,
        /// What went wrong.
        why: String,
    },
}

impl ScrubError {
    /// A stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ScrubError::NotSingleThreaded { .. } => "not_single_threaded",
            ScrubError::ProcUnreadable { .. } => "proc_unreadable",
        }
    }
}

/// Capture `names` from the environment, remove them from it and zero their values in the
/// original environment block. Values that are not UTF-8 are removed but not kept.
pub(super) fn capture_and_scrub(
    names: &BTreeSet<String>,
) -> Result<BTreeMap<String, SecretString>, ScrubError> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(ScrubError::NotSingleThreaded { threads });
    }
    let block = EnvBlock::of_this_process()?;
    let mut values = BTreeMap::new();
    for name in names {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        if let Ok(value) = value.into_string() {
            values.insert(name.clone(), SecretString::from(value));
        }
        // SAFETY: `remove_var` is unsound only when another thread reads or writes the
        // environment at the same time. This process runs one thread (checked above) and
        // nothing here starts one. `names` holds no empty name and none with `=` or NUL.
        unsafe { std::env::remove_var(name) };
    }
    // Only bytes no live `environ` entry points at may be overwritten.
    let gone: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|name| std::env::var_os(name).is_none())
        .collect();
    block.zero_values_of(&gone);
    Ok(values)
}

fn thread_count() -> Result<usize, ScrubError> {
    let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| ScrubError::ProcUnreadable {
        what: "/proc/self/task",
        why: e.to_string(),
    })?;
    Ok(tasks.count())
}

/// The environment block the kernel wrote at exec: `[start, start + len)`.
#[derive(Debug)]
struct EnvBlock {
    start: usize,
    len: usize,
}

impl EnvBlock {
    fn of_this_process() -> Result<EnvBlock, ScrubError> {
        let unreadable = |why: String| ScrubError::ProcUnreadable {
            what: "/proc/self/stat",
            why,
        };
        let stat =
            std::fs::read_to_string("/proc/self/stat").map_err(|e| unreadable(e.to_string()))?;
        let (start, end) = env_bounds(&stat)
            .ok_or_else(|| unreadable("it shows no plausible env_start and env_end".to_owned()))?;
        Ok(EnvBlock {
            start,
            len: end - start,
        })
    }

    /// Zero the value bytes of every `NAME=value` entry whose name is in `names`.
    fn zero_values_of(&self, names: &[&str]) {
        if self.len == 0 || names.is_empty() {
            return;
        }
        let base = self.start as *mut u8;
        let targets = {
            // SAFETY: `[start, start + len)` is the environment block the kernel placed on
            // the main thread's stack at exec (`env_start`..`env_end` of this process). It
            // stays mapped and initialized for the life of the process, `len` is below
            // `isize::MAX`, and nothing writes to it while this shared view lives: the
            // process runs one thread and the view ends before the writes below.
            let block = unsafe { std::slice::from_raw_parts(base.cast_const(), self.len) };
            value_ranges(block, names)
        };
        for offset in targets.into_iter().flatten() {
            // SAFETY: `offset` lies inside the block (see above), whose stack pages are
            // writable. No live `environ` entry points at these bytes: every name whose
            // value they hold is no longer in the environment, and no other thread runs.
            // The write is volatile so that a store nothing reads later is not dropped.
            unsafe { base.add(offset).write_volatile(0) };
        }
    }
}

/// `env_start` and `env_end`: fields 50 and 51 of `/proc/<pid>/stat`. The command name
/// (field 2) may contain spaces and parentheses, so fields are counted after the last `)`.
fn env_bounds(stat: &str) -> Option<(usize, usize)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(50 - 3);
    let start: usize = fields.next()?.parse().ok()?;
    let end: usize = fields.next()?.parse().ok()?;
    (start > 0 && start <= end && end - start <= MAX_BLOCK).then_some((start, end))
}

/// Byte ranges of the values of the `NAME=value` entries in a NUL-separated `block` whose
/// name is one of `names`.
fn value_ranges(block: &[u8], names: &[&str]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut at = 0;
    for entry in block.split(|b| *b == 0) {
        if let Some(eq) = entry.iter().position(|b| *b == b'=')
            && names.iter().any(|name| name.as_bytes() == &entry[..eq])
        {
            ranges.push(at + eq + 1..at + entry.len());
        }
        at += entry.len() + 1;
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_ranges_cover_exactly_the_values_of_the_named_entries() {
        let block = b"PATH=/bin\0KEY=sk-1\0KEYS=other\0KEY=sk-22\0EMPTY=\0";
        let ranges = value_ranges(block, &["KEY", "EMPTY"]);
        let values: Vec<&[u8]> = ranges.iter().map(|r| &block[r.clone()]).collect();
        assert_eq!(values, [&b"sk-1"[..], b"sk-22", b""]);
    }

    #[test]
    fn env_bounds_are_read_after_the_command_name() {
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[50 - 3] = "140000".to_owned();
        fields[51 - 3] = "140512".to_owned();
        let stat = format!("77 (a) (b c)) {}", fields.join(" "));
        assert_eq!(env_bounds(&stat), Some((140000, 140512)));
        assert_eq!(env_bounds("77 (short) S 1 2"), None);
    }

    #[test]
    fn this_process_has_an_environment_block() {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
        let (start, end) = env_bounds(&stat).expect("bounds");
        assert!(start < end);
    }
}
