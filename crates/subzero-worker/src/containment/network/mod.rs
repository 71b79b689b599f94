//! The network of a child's tool processes, as its grant says: `none` (loopback only),
//! an allowlist (loopback, and the proxy that admits only the listed hosts), or `open`.
//!
//! The worker makes one network namespace for its tools at start ([`probe`]; about half a
//! millisecond) with loopback up and the proxy's socket bound at `127.0.0.1:3128` in it.
//! Every tool process of a `none` or allowlist grant joins it between fork and exec
//! ([`ToolNet::enter`], [`ToolNet::give_up_powers`]) — before it makes a user or mount namespace of its own — so every
//! tool of the child shares one loopback (a server one `bash` call starts, the next can
//! reach) and nothing else. The worker itself stays in its own network and reaches its
//! model; for an allowlist it also accepts the tools' connections to the proxy and makes
//! the admitted ones from outside ([`proxy`]), after [`subzero_core::template::Allowlist`]
//! decided. A root tool also loses `CAP_SYS_ADMIN` and `CAP_NET_ADMIN` from its bounding
//! set, so it can neither `setns` back nor move an interface out; its Landlock domain
//! already keeps it from opening another process's namespace.

mod forked;
pub mod namespace;
pub mod proxy;

use std::collections::HashSet;
use std::io;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use subzero_core::template::{Allowlist, HostRule};
use subzero_protocol as p;

use crate::control::{RunId, WorkerEvent};

/// What the probe at start found.
#[derive(Debug)]
pub struct Support {
    namespace: Option<Arc<(Option<OwnedFd>, OwnedFd)>>,
    /// Taken by the first allowlist run (its proxy), or dropped by a `none` run.
    listener: Mutex<Option<TcpListener>>,
    unavailable: Option<String>,
}

static SUPPORT: OnceLock<Support> = OnceLock::new();

/// Makes the tools' namespace once (`off`: never, as `[containment] network = "off"` says)
/// and remembers the answer.
pub fn probe(off: bool) -> &'static Support {
    SUPPORT.get_or_init(|| {
        let made = if off {
            Err("turned off by [containment] network = \"off\" in the config".to_owned())
        } else {
            namespace::make()
        };
        match made {
            Ok(made) => Support {
                namespace: Some(Arc::new((made.user, made.namespace))),
                listener: Mutex::new(Some(made.listener)),
                unavailable: None,
            },
            Err(why) => Support {
                namespace: None,
                listener: Mutex::new(None),
                unavailable: Some(why),
            },
        }
    })
}

/// What [`probe`] found (that it was not run, when it was not).
pub fn support() -> &'static Support {
    SUPPORT.get_or_init(|| Support {
        namespace: None,
        listener: Mutex::new(None),
        unavailable: Some("the worker did not probe for network namespaces".to_owned()),
    })
}

impl Support {
    /// `containment.network` of the hello.
    pub fn receipt(&self) -> Result<p::NetworkSupport, super::Refused> {
        Ok(p::NetworkSupport {
            namespace: self.unavailable.is_none(),
            summary: super::wire(self.summary(), "network.summary")?,
        })
    }

    fn summary(&self) -> String {
        match &self.unavailable {
            None => format!(
                "a network namespace per worker: loopback only, and for an allowlist the proxy at {}",
                namespace::PROXY
            ),
            Some(why) => format!(
                "none: {why}; tool processes of a grant other than `open` cannot run (unsupported_grant)"
            ),
        }
    }

    fn take_listener(&self) -> Option<TcpListener> {
        self.listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// How the tool processes of one run reach the network (absent: the grant is `open`).
#[derive(Debug, Clone)]
pub struct ToolNet {
    /// The owning user namespace (when it is not the worker's) and the network namespace.
    namespace: Arc<(Option<OwnedFd>, OwnedFd)>,
    proxy: bool,
}

/// The variables that send a tool's HTTP traffic through the proxy; the tools' own
/// loopback stays direct.
const PROXY_ENV: [(&str, &str); 8] = [
    ("HTTP_PROXY", "http://127.0.0.1:3128"),
    ("HTTPS_PROXY", "http://127.0.0.1:3128"),
    ("ALL_PROXY", "http://127.0.0.1:3128"),
    ("http_proxy", "http://127.0.0.1:3128"),
    ("https_proxy", "http://127.0.0.1:3128"),
    ("all_proxy", "http://127.0.0.1:3128"),
    ("NO_PROXY", "localhost,127.0.0.1,::1"),
    ("no_proxy", "localhost,127.0.0.1,::1"),
];

impl ToolNet {
    /// The confinement `grant` asks for (`None` for `open` and for a snapshot frozen
    /// before network grants). `Err` is the `unsupported_grant` message: the grant needs a
    /// namespace the kernel did not give, or its hosts are not hosts. The first allowlist
    /// run starts the proxy (a worker runs one child, whose grant never changes); a `none`
    /// run closes the proxy's socket, so a connect to it is refused.
    pub fn prepare(grant: Option<&p::NetworkGrant>) -> Result<Option<ToolNet>, String> {
        let Some(grant) = grant else {
            return Ok(None);
        };
        if grant.mode == p::NetworkMode::Open {
            return Ok(None);
        }
        let support = support();
        let Some(namespace) = support.namespace.clone() else {
            return Err(format!(
                "unsupported_grant: the template's network grant `{}` needs a network namespace for the tools, but {}",
                grant.mode,
                support.unavailable.as_deref().unwrap_or("there is none")
            ));
        };
        let proxy = grant.mode == p::NetworkMode::Allowlist;
        let listener = support.take_listener();
        if proxy && let Some(listener) = listener {
            serve(listener, allowlist(grant)?)?;
        }
        Ok(Some(ToolNet { namespace, proxy }))
    }

    /// Between fork and exec, first of all: join the tools' namespace (while the process
    /// still has the worker's powers). Async-signal-safe.
    pub fn enter(&self) -> io::Result<()> {
        namespace::join(self.namespace.0.as_ref(), &self.namespace.1)
    }

    /// Between fork and exec, once the tool's own namespaces are made: as root, give up the
    /// powers that could leave the network namespace. Async-signal-safe.
    pub fn give_up_powers(&self) -> io::Result<()> {
        namespace::drop_network_powers_of_root()
    }

    /// The proxy variables, for an allowlist.
    pub fn env(&self) -> &'static [(&'static str, &'static str)] {
        if self.proxy { &PROXY_ENV } else { &[] }
    }
}

fn allowlist(grant: &p::NetworkGrant) -> Result<Allowlist, String> {
    let hosts = grant
        .hosts
        .as_ref()
        .map(|h| {
            h.iter()
                .map(|h| HostRule::parse(h))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()
        .map_err(|why| format!("unsupported_grant: the network allowlist is not one: {why}"))?
        .unwrap_or_default();
    Ok(Allowlist::new(hosts))
}

/// Starts the proxy on `listener` and the task that reports its refusals.
fn serve(listener: TcpListener, allowlist: Allowlist) -> Result<(), String> {
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| format!("unsupported_grant: the allowlist proxy cannot listen: {e}"))?;
    let (refused, mut reports) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(proxy::serve(listener, Arc::new(allowlist), refused));
    tokio::spawn(async move {
        while let Some(report) = reports.recv().await {
            report_refusal(&report);
        }
    });
    Ok(())
}

/// The `(host, port)`s a run reported.
type Reported = HashSet<(String, u16)>;

/// The run the proxy's refusals belong to, and what it already reported.
static RUN: Mutex<Option<(RunId, Reported)>> = Mutex::new(None);

/// Most distinct refusals one run reports as events; a tool looping on refused connects
/// cannot flood the parent's event log (each `(host, port)` is reported once a run).
const REPORTED_MAX: usize = 64;

/// The run the proxy's refusals belong to from now on.
pub fn run_started(run: &RunId) {
    *RUN.lock().unwrap_or_else(PoisonError::into_inner) = Some((run.clone(), HashSet::new()));
}

/// The run to report `(host, port)` for, unless this run reported it (or enough) already.
fn report_for(host: &str, port: u16) -> Option<RunId> {
    let mut current = RUN.lock().unwrap_or_else(PoisonError::into_inner);
    let (run, reported) = current.as_mut()?;
    if reported.len() >= REPORTED_MAX || !reported.insert((host.to_owned(), port)) {
        return None;
    }
    Some(run.clone())
}

/// A `network_refused` event for the current run (the host as asked, made printable).
fn report_refusal(report: &proxy::Refused) {
    let shown = printable(&report.host);
    tracing::info!(host = %shown, port = report.port, why = %report.why, "a tool's connection was refused");
    let (Some(run), Ok(host), Some(port)) = (
        report_for(&shown, report.port),
        p::RefusedHost::try_from(shown.clone()),
        std::num::NonZeroU64::new(u64::from(report.port)),
    ) else {
        return;
    };
    crate::emit::event(
        &run,
        WorkerEvent::NetworkRefused {
            host,
            port: port.into(),
        },
    );
}

/// `host` with every character a host name or address does not have replaced by `?`, at
/// most 255 characters: a tool's text must not reach a parent's terminal as is.
fn printable(host: &str) -> String {
    let shown: String = host
        .chars()
        .take(255)
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_:[]*".contains(c) {
                c
            } else {
                '?'
            }
        })
        .collect();
    if shown.is_empty() {
        "?".to_owned()
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_reported_once_a_run_and_at_most_a_bounded_number_of_times() {
        let run = RunId::try_from("run_0000000000000000000000NT09").expect("a run id");
        run_started(&run);
        assert_eq!(report_for("evil.example", 443), Some(run.clone()));
        assert_eq!(
            report_for("evil.example", 443),
            None,
            "the same host and port again"
        );
        assert_eq!(report_for("evil.example", 80), Some(run.clone()));
        for n in 0..REPORTED_MAX {
            let _ = report_for(&format!("h{n}.example"), 1);
        }
        assert_eq!(
            report_for("one.more.example", 1),
            None,
            "the run reported enough"
        );
        run_started(&run);
        assert_eq!(
            report_for("evil.example", 443),
            Some(run),
            "a new run reports again"
        );
    }

    #[test]
    fn a_host_reaches_the_event_printable() {
        assert_eq!(printable("Evil.example"), "Evil.example");
        assert_eq!(printable("\u{1b}]52;c;x\u{7}"), "?]52?c?x?");
        assert_eq!(printable(""), "?");
        assert_eq!(printable(&"a".repeat(300)).len(), 255);
    }
}
