//! The allowlist proxy: the only way out of a tool namespace that has loopback only.
//!
//! The worker accepts, on a listener made inside the tools' namespace (the one their
//! `HTTP_PROXY`/`HTTPS_PROXY` name), `CONNECT host:port` tunnels and plain-HTTP requests in
//! absolute form, and connects upstream from its own namespace. What is admitted is
//! [`Allowlist`]'s decision, not the proxy's; the proxy carries it out:
//!
//! - a name the allowlist does not list is never resolved (the lookup alone would tell DNS);
//! - a listed name is resolved once, and the proxy connects only to the addresses
//!   [`Allowlist::admit`] returned — never resolving again, so DNS rebinding cannot slip an
//!   address past the check; an address literal is not resolved at all;
//! - each refusal answers `403` and is reported as a [`Refused`] on the caller's channel.
//!
//! A URL's path and query are never logged nor reported: only the host and port. A forwarded
//! plain-HTTP request goes out with `Connection: close`, so one client connection reaches one
//! host. The proxy does no TLS (a tunnel carries the client's own) and no authentication.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use subzero_core::template::{Allowlist, Refusal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::timeout;
use tracing::debug;

/// Most bytes a request head may take, its blank line included.
const HEAD_MAX: usize = 16 * 1024;
/// How long a client has to send its whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long resolving a listed name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to one admitted address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// After an error answer the proxy keeps reading (and discarding) for this long, at most
/// [`LINGER_MAX`] bytes, before it closes: closing with unread input resets the connection,
/// which can destroy the answer before the client reads it.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_MAX: u64 = 64 * 1024;
/// Most client connections served at once: a tool cannot make the worker hold more
/// descriptors than this for it (further connects wait in the listener's backlog).
const CONNECTIONS_MAX: usize = 256;
/// How long accepting pauses when the process is out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
/// Headers that concern the hop to the proxy; the proxy adds its own `Connection: close`.
const HOP_BY_HOP: [&str; 3] = ["connection", "proxy-connection", "proxy-authorization"];

type Status = (u16, &'static str);
const BAD_REQUEST: Status = (400, "Bad Request");
const FORBIDDEN: Status = (403, "Forbidden");
const HEAD_TOO_LARGE: Status = (431, "Request Header Fields Too Large");
const BAD_GATEWAY: Status = (502, "Bad Gateway");

/// One connection the proxy refused: the host the tool asked for (never the URL's path or
/// query), its port, and why.
///
/// `host` is lowercase, an IPv6 literal without its brackets; `why` is
/// [`Refusal::describe`]'s line, the one the tool's `403` carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub host: String,
    pub port: u16,
    pub why: String,
}

/// Serves `listener` until it fails or the task is dropped; each connection on its own tokio
/// task.
///
/// Every refusal is sent on `refused` (a closed receiver is ignored). Failing to accept one
/// connection (aborted by the client, out of file descriptors) does not end the proxy; any
/// other accept error does, and is logged at `debug`.
pub async fn serve(
    listener: TcpListener,
    allowlist: Arc<Allowlist>,
    refused: UnboundedSender<Refused>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((client, _)) => {
                let allowlist = Arc::clone(&allowlist);
                let refused = refused.clone();
                tokio::spawn(async move {
                    handle(client, &allowlist, &refused).await;
                    drop(slot);
                });
            }
            Err(error) if out_of_resources(&error) => {
                debug!(%error, "proxy: cannot accept now; pausing");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
            Err(error) if one_connection_failed(&error) => {
                debug!(%error, "proxy: a connection failed before it was accepted");
            }
            Err(error) => {
                debug!(%error, "proxy: the listener failed; the proxy stops");
                return;
            }
        }
    }
}

fn out_of_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

fn one_connection_failed(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || error.raw_os_error() == Some(libc::EPROTO)
}

/// One client connection, from its request head to its close.
async fn handle(mut client: TcpStream, allowlist: &Allowlist, refused: &UnboundedSender<Refused>) {
    let (head, early) = match timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(HeadError::TooLong)) => {
            let line = format!("subzero: the request head is over {HEAD_MAX} bytes");
            return answer(client, HEAD_TOO_LARGE, &line).await;
        }
        Ok(Err(HeadError::Closed)) | Err(_) => return,
    };
    let request = match parse_head(&head) {
        Ok(request) => request,
        Err(why) => return answer(client, BAD_REQUEST, &format!("subzero: {why}")).await,
    };
    let (host, port) = (request.host.as_str(), request.port);
    let addresses = match decide(allowlist, host, port).await {
        Decision::Admitted(addresses) => addresses,
        Decision::Refused(refusal) => return refuse(client, host, port, refusal, refused).await,
        Decision::Unresolvable => {
            debug!(host, port, "proxy: cannot resolve");
            let line = format!("subzero: cannot resolve {host}");
            return answer(client, BAD_GATEWAY, &line).await;
        }
    };
    let upstream = match connect(&addresses, port).await {
        Ok(upstream) => upstream,
        Err(error) => {
            debug!(host, port, %error, "proxy: cannot connect");
            let line = format!("subzero: cannot connect to {}:{port}: {error}", shown(host));
            return answer(client, BAD_GATEWAY, &line).await;
        }
    };
    debug!(host, port, "proxy: admitted");
    relay(client, upstream, request.forward.as_deref(), &early).await;
}

/// Why no request head was read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    /// The head is longer than [`HEAD_MAX`].
    TooLong,
    /// The client closed, or reading failed, before the head ended.
    Closed,
}

/// The request head (through its blank line) and whatever the client sent after it.
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), HeadError> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|_| HeadError::Closed)?;
        let Some(read) = chunk.get(..n).filter(|read| !read.is_empty()) else {
            return Err(HeadError::Closed);
        };
        let from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(read);
        match head_end(&buffer, from) {
            Some(end) if end <= HEAD_MAX => {
                let early = buffer.split_off(end);
                return Ok((buffer, early));
            }
            Some(_) => return Err(HeadError::TooLong),
            None if buffer.len() >= HEAD_MAX => return Err(HeadError::TooLong),
            None => {}
        }
    }
}

/// Where the head in `buffer` ends (just past its blank line, `\n\r\n` or `\n\n`), searching
/// from `from`.
fn head_end(buffer: &[u8], from: usize) -> Option<usize> {
    (from..buffer.len()).find_map(|i| match buffer.get(i..) {
        Some([b'\n', b'\n', ..]) => Some(i + 2),
        Some([b'\n', b'\r', b'\n', ..]) => Some(i + 3),
        _ => None,
    })
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    /// Lowercase; an IPv6 literal without its brackets.
    host: String,
    port: u16,
    /// `None` for a `CONNECT` tunnel; for plain HTTP, the head to send upstream.
    forward: Option<Vec<u8>>,
}

/// The request `head` makes, or why it is a bad request (one line for the tool).
fn parse_head(head: &[u8]) -> Result<Request, &'static str> {
    let (line, fields) = match head.iter().position(|&b| b == b'\n') {
        Some(at) => head.split_at(at + 1),
        None => (head, &[][..]),
    };
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (method, target, version) = request_line(line)?;
    if method == "CONNECT" {
        let (host, port) = authority(target, None)?;
        return Ok(Request {
            host,
            port,
            forward: None,
        });
    }
    let (host, port, origin) = absolute_http(target)?;
    let forward = rewrite(method, &origin, version, fields)?;
    Ok(Request {
        host,
        port,
        forward: Some(forward),
    })
}

/// The method, target and version of a request line `METHOD SP target SP HTTP/1.x`.
fn request_line(line: &[u8]) -> Result<(&str, &str, &str), &'static str> {
    const MALFORMED: &str = "the request line is not `METHOD target HTTP/1.1`";
    if !line.iter().all(|&b| b == b' ' || b.is_ascii_graphic()) {
        return Err(MALFORMED);
    }
    let line = std::str::from_utf8(line).map_err(|_| MALFORMED)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(MALFORMED);
    };
    if method.is_empty() || !method.bytes().all(is_token) || target.is_empty() {
        return Err(MALFORMED);
    }
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err("the proxy speaks HTTP/1.0 and HTTP/1.1 only");
    }
    Ok((method, target, version))
}

/// Whether `b` may be in an HTTP token (a method, a header name).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The host, port and origin-form target of an absolute `http://` URL.
fn absolute_http(target: &str) -> Result<(String, u16, String), &'static str> {
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        return Err(if strip_prefix_ignore_case(target, "https://").is_some() {
            "https:// goes through a CONNECT tunnel: set HTTPS_PROXY, not an absolute https:// URL"
        } else if target.starts_with('/') {
            "this is a proxy: the request names an absolute http:// URL (or is a CONNECT)"
        } else {
            "the request target is not an http:// URL"
        });
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host_port, tail) = rest.split_at(end);
    if host_port.contains('@') {
        return Err("the proxy does not pass credentials in a URL");
    }
    let (host, port) = authority(host_port, Some(80))?;
    let tail = tail.split_once('#').map_or(tail, |(before, _)| before);
    let origin = match tail {
        "" => "/".to_owned(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_owned(),
    };
    Ok((host, port, origin))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

/// The host (lowercase, without brackets) and port of `host:port`, `[v6]:port`, or, when
/// `default_port` is given, either without its port.
fn authority(text: &str, default_port: Option<u16>) -> Result<(String, u16), &'static str> {
    const NOT_A_HOST: &str = "the request does not name a host (name, address or [v6])";
    let (host, after) = match text.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest.split_once(']').ok_or(NOT_A_HOST)?;
            v6.parse::<Ipv6Addr>().map_err(|_| NOT_A_HOST)?;
            (v6, after)
        }
        None => text.find(':').map_or((text, ""), |at| text.split_at(at)),
    };
    let name_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':');
    if host.is_empty() || !host.bytes().all(name_byte) {
        return Err(NOT_A_HOST);
    }
    let port = match after {
        "" | ":" => default_port.ok_or("a CONNECT names its port: `CONNECT host:port HTTP/1.1`")?,
        _ => parse_port(after.strip_prefix(':').ok_or(NOT_A_HOST)?)?,
    };
    Ok((host.to_ascii_lowercase(), port))
}

fn parse_port(text: &str) -> Result<u16, &'static str> {
    const BAD_PORT: &str = "the port is not 1..=65535";
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BAD_PORT);
    }
    text.parse::<u16>()
        .ok()
        .filter(|&port| port > 0)
        .ok_or(BAD_PORT)
}

/// The head to send upstream: the request line in origin form, the client's header fields
/// but the hop-by-hop ones, and `Connection: close`.
fn rewrite(
    method: &str,
    origin: &str,
    version: &str,
    fields: &[u8],
) -> Result<Vec<u8>, &'static str> {
    const MALFORMED: &str = "a header field is malformed";
    let mut head = format!("{method} {origin} {version}\r\n").into_bytes();
    for line in fields.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if matches!(line.first(), Some(b' ' | b'\t')) {
            return Err("folded header fields are not supported");
        }
        if line.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(MALFORMED);
        }
        let colon = line.iter().position(|&b| b == b':').ok_or(MALFORMED)?;
        let name = line.get(..colon).unwrap_or_default();
        if name.is_empty() || !name.iter().all(|&b| is_token(b)) {
            return Err(MALFORMED);
        }
        if HOP_BY_HOP
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        {
            continue;
        }
        head.extend_from_slice(line);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(head)
}

/// The allowlist's answer for `host:port`.
#[derive(Debug)]
enum Decision {
    /// Connect to these addresses, in order, and to no other.
    Admitted(Vec<IpAddr>),
    Refused(Refusal),
    /// Looking up a listed name failed.
    Unresolvable,
}

/// Asks the allowlist, resolving `host` only once it is listed and only when it is a name.
async fn decide(allowlist: &Allowlist, host: &str, port: u16) -> Decision {
    if !allowlist.admits_name(host, port) {
        return Decision::Refused(Refusal::NotListed);
    }
    let resolved = match host.parse::<IpAddr>() {
        Ok(literal) => vec![literal],
        Err(_) => match resolve(host, port).await {
            Some(resolved) => resolved,
            None => return Decision::Unresolvable,
        },
    };
    match allowlist.admit(host, port, &resolved) {
        Ok(admitted) => Decision::Admitted(admitted),
        Err(refusal) => Decision::Refused(refusal),
    }
}

/// The addresses `host` resolves to, each once, in the resolver's order; `None` when the
/// lookup fails or takes longer than [`RESOLVE_TIMEOUT`].
async fn resolve(host: &str, port: u16) -> Option<Vec<IpAddr>> {
    let found = timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .ok()?
        .ok()?;
    let mut addresses: Vec<IpAddr> = Vec::new();
    for address in found.map(|a| a.ip()) {
        if !addresses.contains(&address) {
            addresses.push(address);
        }
    }
    Some(addresses)
}

/// A connection to the first of `addresses` that answers on `port`; the last error when
/// none does.
async fn connect(addresses: &[IpAddr], port: u16) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for &address in addresses {
        let to = SocketAddr::new(address, port);
        match timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await {
            Ok(Ok(upstream)) => return Ok(upstream),
            Ok(Err(error)) => last = error,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connection timed out"),
        }
    }
    Err(last)
}

/// Starts the exchange (the tunnel's `200`, or the rewritten head upstream), forwards what
/// the client sent after its head, then copies both ways until both sides are done.
async fn relay(
    mut client: TcpStream,
    mut upstream: TcpStream,
    forward: Option<&[u8]>,
    early: &[u8],
) {
    // Best effort: a tunnel's TLS handshake is many small writes.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let started = match forward {
        None => client.write_all(ESTABLISHED).await,
        Some(head) => upstream.write_all(head).await,
    };
    if started.is_err() || upstream.write_all(early).await.is_err() {
        return;
    }
    if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        debug!(%error, "proxy: a relayed connection ended with an error");
    }
}

/// Answers `403` for `refusal`, and reports it.
async fn refuse(
    client: TcpStream,
    host: &str,
    port: u16,
    refusal: Refusal,
    refused: &UnboundedSender<Refused>,
) {
    let why = refusal.describe(&shown(host), port);
    debug!(host, port, why, "proxy: refused");
    let line = format!("subzero: {why}");
    let _ = refused.send(Refused {
        host: host.to_owned(),
        port,
        why,
    });
    answer(client, FORBIDDEN, &line).await;
}

/// `host` as it is written before `:port`: an IPv6 literal in brackets.
fn shown(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// Answers `status` with the one-line plain-text body `line`, and closes.
async fn answer(mut client: TcpStream, (code, reason): Status, line: &str) {
    let response = response(code, reason, line);
    if let Ok(Ok(())) = timeout(LINGER, client.write_all(response.as_bytes())).await {
        linger_close(client).await;
    }
}

fn response(code: u16, reason: &str, line: &str) -> String {
    let body = format!("{line}\n");
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Ends the answer (`FIN`), then discards what the client still sends, bounded in time and
/// bytes, so that closing does not reset the connection before the client read the answer.
async fn linger_close(mut client: TcpStream) {
    if client.shutdown().await.is_err() {
        return;
    }
    let mut rest = (&mut client).take(LINGER_MAX);
    let _ = timeout(LINGER, tokio::io::copy(&mut rest, &mut tokio::io::sink())).await;
}

#[cfg(test)]
mod tests;
