//! Resource limits (`setrlimit`) as the worker puts them on its tool processes: a value
//! capped at the hard limit this process inherited ([`capped`]: limits only ever go down),
//! then set as both soft and hard limit between fork and exec ([`set`], async-signal-safe:
//! one `prlimit64` system call, no allocation).

pub use rustix::process::Resource;
use rustix::process::{Rlimit, getrlimit, setrlimit};

/// `value`, or the inherited hard limit when that is lower (an unprivileged process
/// cannot raise it).
pub fn capped(resource: Resource, value: u64) -> u64 {
    match getrlimit(resource).maximum {
        Some(hard) => value.min(hard),
        None => value,
    }
}

/// `setrlimit(resource, value, value)`; async-signal-safe.
pub fn set(resource: Resource, value: u64) -> std::io::Result<()> {
    let limit = Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    setrlimit(resource, limit).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_only_go_down() {
        let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
        assert_eq!(capped(Resource::Nofile, u64::MAX), hard);
        assert_eq!(capped(Resource::Nofile, 16), 16.min(hard));
    }
}
