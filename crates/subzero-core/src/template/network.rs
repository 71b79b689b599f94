//! The network a template grants its child's tool processes, and the decision of which
//! connection an allowlist admits.
//!
//! `none` (every template's default): the tools have a network namespace with loopback
//! only. An allowlist: the same namespace, and a proxy outside it that admits a
//! connection only to a listed host — matched on the name the tool asked for, then on every
//! address that name resolves to, so a listed name resolving to a loopback or private
//! address is refused unless that address is listed too (DNS rebinding). `open`: the
//! tools share the worker's network. The worker itself reaches its model in every mode.
//! The proxy only carries out [`Allowlist::admit`]'s answer.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::{TemplateError, WorkerKind};

/// Most hosts one allowlist names.
pub const ALLOWLIST_MAX: usize = 64;

/// A template's `network` as the configuration file writes it: `"none"`, `"open"`, or a
/// list of hosts (`"registry.npmjs.org"`, `"pypi.org:443"`, `"*.example.com"`,
/// `"127.0.0.1:8080"`, `"[::1]:8080"`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetworkConfig {
    /// `"none"` or `"open"`.
    Mode(NetworkMode),
    /// The hosts of an allowlist.
    Hosts(Vec<String>),
}

/// The two grants a word names.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Loopback only.
    None,
    /// The worker's network.
    Open,
}

/// The network grant frozen in a snapshot.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum NetworkGrant {
    /// Tool processes have loopback only.
    None,
    /// Tool processes reach the listed hosts through the worker's proxy, nothing else.
    Allowlist {
        /// The hosts, each as [`HostRule`] writes it.
        hosts: Vec<HostRule>,
    },
    /// Tool processes share the worker's network.
    Open,
}

impl NetworkGrant {
    /// The grant `config` names (`None` when the template says nothing: `none`). An empty
    /// or over-long list, or a host that is not one, is `unsupported_grant`.
    pub fn freeze(config: Option<&NetworkConfig>) -> Result<Self, TemplateError> {
        let refuse = |what: String| Err(TemplateError::UnsupportedGrant { what });
        match config {
            None | Some(NetworkConfig::Mode(NetworkMode::None)) => Ok(NetworkGrant::None),
            Some(NetworkConfig::Mode(NetworkMode::Open)) => Ok(NetworkGrant::Open),
            Some(NetworkConfig::Hosts(hosts)) if hosts.is_empty() => refuse(
                "network lists no host; write network = \"none\" for loopback only".to_owned(),
            ),
            Some(NetworkConfig::Hosts(hosts)) if hosts.len() > ALLOWLIST_MAX => refuse(format!(
                "network lists {} hosts; at most {ALLOWLIST_MAX}",
                hosts.len()
            )),
            Some(NetworkConfig::Hosts(hosts)) => hosts
                .iter()
                .map(|h| HostRule::parse(h))
                .collect::<Result<Vec<_>, _>>()
                .map(|hosts| NetworkGrant::Allowlist { hosts })
                .or_else(|why| refuse(format!("network: {why}"))),
        }
    }

    /// The grant of a template run by `worker`: the Pi worker runs its tools from the
    /// process that reaches the model, so it cannot keep them off the network — its
    /// templates are `open` unless they say otherwise, and refused when they do.
    pub fn freeze_for(
        worker: WorkerKind,
        config: Option<&NetworkConfig>,
    ) -> Result<Self, TemplateError> {
        match (worker, config) {
            (WorkerKind::Pi, None) => Ok(NetworkGrant::Open),
            (WorkerKind::Pi, Some(config)) => match Self::freeze(Some(config))? {
                NetworkGrant::Open => Ok(NetworkGrant::Open),
                _ => Err(TemplateError::UnsupportedGrant {
                    what: "the Pi worker runs its tools from the process that reaches the model, so it cannot keep them off the network: set network = \"open\" or drop worker = \"pi\"".to_owned(),
                }),
            },
            (WorkerKind::Rust, config) => Self::freeze(config),
        }
    }

    /// `none`, `allowlist` or `open`.
    pub const fn mode(&self) -> &'static str {
        match self {
            NetworkGrant::None => "none",
            NetworkGrant::Allowlist { .. } => "allowlist",
            NetworkGrant::Open => "open",
        }
    }

    /// Whether tool processes need a network namespace of their own.
    pub const fn needs_namespace(&self) -> bool {
        !matches!(self, NetworkGrant::Open)
    }
}

/// One allowlisted host: a name, a wildcard over a domain's subdomains, or an address;
/// any port unless it names one.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostRule {
    host: RuleHost,
    port: Option<u16>,
}

#[derive(Clone, PartialEq, Eq, Debug)]
enum RuleHost {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// `*.domain`: any name below `domain` (not `domain` itself).
    Below(String),
    /// An address.
    Address(IpAddr),
}

impl HostRule {
    /// `host`, `host:port`, `*.domain[:port]`, an IPv4 address, `[v6]` or `[v6]:port`, or a
    /// bare IPv6 address; `Err` says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let shown = || text.chars().take(80).collect::<String>();
        let (host, port) = split_port(text).ok_or_else(|| {
            format!(
                "`{}` is not a host: write name, name:port, *.domain or an address",
                shown()
            )
        })?;
        let port = port
            .map(|p| match p.parse::<u16>() {
                Ok(p) if p > 0 => Ok(p),
                _ => Err(format!("`{}`: the port must be 1..=65535", shown())),
            })
            .transpose()?;
        let host = if let Ok(address) = host.parse::<IpAddr>() {
            RuleHost::Address(address)
        } else if let Some(domain) = host.strip_prefix("*.") {
            RuleHost::Below(dns_name(domain).ok_or_else(|| bad_name(&shown()))?)
        } else {
            RuleHost::Name(dns_name(host).ok_or_else(|| bad_name(&shown()))?)
        };
        Ok(HostRule { host, port })
    }

    fn ports(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }
}

fn bad_name(shown: &str) -> String {
    format!(
        "`{shown}` is not a DNS name (labels of a-z 0-9 - of at most 63 characters, 253 in all)"
    )
}

/// `(host, port)` of `host[:port]`, `[v6][:port]` or a bare IPv6 address.
fn split_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match text.matches(':').count() {
        0 => Some((text, None)),
        1 => text.split_once(':').map(|(h, p)| (h, Some(p))),
        _ => Some((text, None)),
    }
}

/// `name` lowercase without its trailing dot, when it is a DNS name.
fn dns_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (!name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
}

impl TryFrom<String> for HostRule {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        HostRule::parse(&text)
    }
}

impl From<HostRule> for String {
    fn from(rule: HostRule) -> String {
        rule.to_string()
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.host, self.port) {
            (RuleHost::Name(n), None) => f.write_str(n),
            (RuleHost::Below(d), None) => write!(f, "*.{d}"),
            (RuleHost::Address(IpAddr::V6(a)), None) => write!(f, "[{a}]"),
            (RuleHost::Address(a), None) => write!(f, "{a}"),
            (RuleHost::Name(n), Some(p)) => write!(f, "{n}:{p}"),
            (RuleHost::Below(d), Some(p)) => write!(f, "*.{d}:{p}"),
            (RuleHost::Address(IpAddr::V6(a)), Some(p)) => write!(f, "[{a}]:{p}"),
            (RuleHost::Address(a), Some(p)) => write!(f, "{a}:{p}"),
        }
    }
}

/// The hosts of an allowlist grant, and the decision of what a connection may reach.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Allowlist {
    rules: Vec<HostRule>,
}

/// Why the proxy refused a connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Refusal {
    /// The host the tool asked for (with its port) is not listed.
    NotListed,
    /// The name is listed, but every address it resolves to is loopback, private, link-local
    /// or otherwise not public, and none of them is listed.
    ForbiddenAddress(IpAddr),
    /// The name resolves to no address.
    NoAddress,
}

impl Refusal {
    /// One line for the tool's `403` and the log.
    pub fn describe(&self, host: &str, port: u16) -> String {
        match self {
            Refusal::NotListed => {
                format!("{host}:{port} is not in this child's network allowlist")
            }
            Refusal::ForbiddenAddress(a) => format!(
                "{host}:{port} resolves to {a}, a non-public address the allowlist does not name"
            ),
            Refusal::NoAddress => format!("{host} resolves to no address"),
        }
    }
}

impl Allowlist {
    /// The allowlist of `hosts`.
    pub fn new(hosts: Vec<HostRule>) -> Self {
        Allowlist { rules: hosts }
    }

    /// The listed hosts.
    pub fn hosts(&self) -> &[HostRule] {
        &self.rules
    }

    /// Whether the host a tool asked for (a name, or an address literal, optionally in
    /// brackets) is listed for `port` — the first check, before anything is resolved.
    pub fn admits_name(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(address) = host.parse::<IpAddr>() {
            return self.lists_address(address, port);
        }
        let Some(name) = dns_name(host) else {
            return false;
        };
        self.rules.iter().any(|r| {
            r.ports(port)
                && match &r.host {
                    RuleHost::Name(n) => *n == name,
                    RuleHost::Below(d) => name
                        .strip_suffix(d.as_str())
                        .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                    RuleHost::Address(_) => false,
                }
        })
    }

    /// The addresses among `resolved` (what `host` resolves to) a connection to
    /// `host:port` may reach: every public one, and each other one the allowlist names.
    /// `Err` when the name is not listed or no address is left.
    pub fn admit(
        &self,
        host: &str,
        port: u16,
        resolved: &[IpAddr],
    ) -> Result<Vec<IpAddr>, Refusal> {
        if !self.admits_name(host, port) {
            return Err(Refusal::NotListed);
        }
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let admitted: Vec<IpAddr> = resolved
            .iter()
            .copied()
            .filter(|a| match literal {
                Some(listed) => *a == listed,
                None => is_public(*a) || self.lists_address(*a, port),
            })
            .collect();
        match (admitted.is_empty(), resolved.first()) {
            (false, _) => Ok(admitted),
            (true, Some(first)) => Err(Refusal::ForbiddenAddress(*first)),
            (true, None) => Err(Refusal::NoAddress),
        }
    }

    fn lists_address(&self, address: IpAddr, port: u16) -> bool {
        let address = canonical(address);
        self.rules.iter().any(|r| {
            r.ports(port) && matches!(r.host, RuleHost::Address(a) if canonical(a) == address)
        })
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `address` is on the public internet: not loopback, private, shared (CGNAT),
/// link-local, unspecified, broadcast, multicast, documentation or reserved.
pub fn is_public(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(a: Ipv4Addr) -> bool {
    let [b0, b1, ..] = a.octets();
    !(a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || a.is_documentation()
        || b0 == 0
        || b0 >= 240
        || (b0 == 100 && (64..128).contains(&b1))
        || (b0 == 192 && b1 == 0 && a.octets()[2] == 0)
        || (b0 == 198 && (18..20).contains(&b1)))
}

fn is_public_v6(a: Ipv6Addr) -> bool {
    let first = a.segments()[0];
    if first == 0x0064 && a.segments()[1] == 0xff9b {
        // NAT64: the IPv4 address it carries decides.
        let [.., w, x, y, z] = a.octets();
        return is_public_v4(Ipv4Addr::new(w, x, y, z));
    }
    !(a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || first == 0x2001 && a.segments()[1] == 0x0db8)
}

#[cfg(test)]
mod tests;
