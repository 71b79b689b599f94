//! The process table as `/proc` lists it.

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

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_listed() {
        let me = std::process::id();
        assert!(super::pids().any(|(pid, dir)| pid == me && dir.ends_with(me.to_string())));
    }
}
