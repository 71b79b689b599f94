//! The host versions the real-host suite runs against: the one table `subzero_info.hostAdapters`
//! reports.
//!
//! Each row is kept true by its host's test (`crates/subzero/tests/host_<host>.rs`): the test
//! installs the host from `crates/subzero/tests/hosts/<host>/package-lock.json`, checks that the
//! installed version equals the row, and checks that `subzero_info` reports the row. Changing a
//! pin therefore means changing the row, and the other way round.

use super::Host;

/// One tested host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestedHost {
    pub host: Host,
    /// The npm package the suite installs the host from.
    pub package: &'static str,
    /// The exact version pinned in that package's lockfile.
    pub version: &'static str,
}

/// Every host with a passing real-host test, in `subzero hosts` order.
pub const TESTED_HOSTS: &[TestedHost] = &[
    TestedHost {
        host: Host::Codex,
        package: "@openai/codex",
        version: "0.171.0",
    },
    TestedHost {
        host: Host::ClaudeCode,
        package: "@anthropic-ai/claude-code",
        version: "2.1.332",
    },
    TestedHost {
        host: Host::OpenCode,
        package: "opencode-ai",
        version: "1.18.33",
    },
    TestedHost {
        host: Host::Pi,
        package: super::pi::PACKAGE,
        version: "1.6.0",
    },
];

/// "tested with: <package> <version>" for `host`, when it has a row.
pub(super) fn tested_with(host: Host) -> Option<String> {
    TESTED_HOSTS
        .iter()
        .find(|t| t.host == host)
        .map(|t| format!("tested with: {} {}.", t.package, t.version))
}

/// The table as the broker reports it (`host` is the `subzero hosts` name).
pub fn host_adapters() -> Vec<subzero_runtime::broker::TestedHost> {
    TESTED_HOSTS
        .iter()
        .map(|t| subzero_runtime::broker::TestedHost {
            host: t.host.name().to_owned(),
            version: t.version.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_has_at_most_one_row() {
        for (i, row) in TESTED_HOSTS.iter().enumerate() {
            assert!(
                TESTED_HOSTS[i + 1..].iter().all(|r| r.host != row.host),
                "{} is listed twice",
                row.host.name()
            );
        }
    }

    #[test]
    fn every_row_names_an_exact_version() {
        for row in TESTED_HOSTS {
            let parts: Vec<_> = row.version.split('.').collect();
            assert_eq!(parts.len(), 3, "{}: {}", row.host.name(), row.version);
            assert!(
                parts.iter().all(|p| p.parse::<u64>().is_ok()),
                "{}: {} is not an exact x.y.z version",
                row.host.name(),
                row.version
            );
        }
    }

    #[test]
    fn the_broker_gets_the_hosts_by_their_command_line_names() {
        let adapters = host_adapters();
        assert_eq!(adapters.len(), TESTED_HOSTS.len());
        assert!(
            adapters
                .iter()
                .any(|a| a.host == "opencode" && a.version == "1.18.33")
        );
    }
}
