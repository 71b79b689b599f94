//! The proxy on real loopback sockets: upstream servers listen on 127.0.0.2 (and 127.0.0.1),
//! which Linux routes to `lo` like all of 127/8.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use subzero_core::template::{Allowlist, HostRule};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::sync::oneshot;
use tokio::time::timeout;
use tracing_subscriber::fmt::MakeWriter;

use super::*;

/// Longer than the proxy's own resolve and connect timeouts: a hang fails the test.
const DEADLINE: Duration = Duration::from_secs(20);

/// A proxy admitting `hosts`, and the channel its refusals arrive on.
async fn proxy(hosts: &[String]) -> (SocketAddr, UnboundedReceiver<Refused>) {
    let rules = hosts
        .iter()
        .map(|h| HostRule::parse(h).expect("a host rule"))
        .collect();
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let address = listener.local_addr().expect("the proxy's address");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(serve(listener, Arc::new(Allowlist::new(rules)), tx));
    (address, rx)
}

/// An upstream on `ip` echoing every connection.
async fn echo_upstream(ip: &str) -> SocketAddr {
    let listener = TcpListener::bind((ip, 0)).await.expect("bind an upstream");
    let address = listener.local_addr().expect("the upstream's address");
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut from, mut to) = connection.split();
                let _ = tokio::io::copy(&mut from, &mut to).await;
            });
        }
    });
    address
}

/// An upstream answering one request `200 ok` once it received a head and `body_len` more
/// bytes, which it hands over.
async fn http_upstream(body_len: usize) -> (SocketAddr, oneshot::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind an upstream");
    let address = listener.local_addr().expect("the upstream's address");
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut connection, _) = listener.accept().await.expect("a connection");
        let mut received = Vec::new();
        let mut chunk = [0u8; 1024];
        while head_end(&received, 0).is_none_or(|end| received.len() < end + body_len) {
            let n = connection.read(&mut chunk).await.expect("read the request");
            assert!(n > 0, "the request ended early");
            received.extend_from_slice(&chunk[..n]);
        }
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        connection.write_all(answer).await.expect("answer");
        let _ = tx.send(received);
    });
    (address, rx)
}

/// A port on 127.0.0.2 nothing listens on.
async fn unused_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.2:0").await.expect("bind");
    listener.local_addr().expect("its address").port()
}

/// What the proxy answers to `request`, read to its close.
async fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    timeout(DEADLINE, async {
        let mut client = TcpStream::connect(proxy)
            .await
            .expect("connect to the proxy");
        client.write_all(request).await.expect("send the request");
        let mut answer = Vec::new();
        client
            .read_to_end(&mut answer)
            .await
            .expect("read the answer");
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
    .expect("the proxy answers and closes within the deadline")
}

async fn next_refusal(refusals: &mut UnboundedReceiver<Refused>) -> Refused {
    timeout(DEADLINE, refusals.recv())
        .await
        .expect("a refusal within the deadline")
        .expect("the channel is open")
}

async fn read_exactly(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    timeout(DEADLINE, stream.read_exact(&mut bytes))
        .await
        .expect("bytes within the deadline")
        .expect("read");
    bytes
}

/// Everything the `debug` log says while it is alive, on this thread (a `#[tokio::test]`
/// runs the proxy's tasks on its own thread).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(self.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("the log")).into_owned()
    }
}

impl Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("the log").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Log {
    type Writer = Log;
    fn make_writer(&'a self) -> Log {
        self.clone()
    }
}

#[tokio::test]
async fn a_connect_to_a_listed_address_is_tunneled_both_ways() {
    let upstream = echo_upstream("127.0.0.2").await;
    let (proxy, _refusals) = proxy(&[upstream.to_string()]).await;
    let mut client = TcpStream::connect(proxy)
        .await
        .expect("connect to the proxy");
    let connect = format!("CONNECT {upstream} HTTP/1.1\r\nHost: {upstream}\r\n\r\nearly");
    client.write_all(connect.as_bytes()).await.expect("send");

    assert_eq!(
        read_exactly(&mut client, ESTABLISHED.len()).await,
        ESTABLISHED
    );
    assert_eq!(read_exactly(&mut client, 5).await, b"early");
    client.write_all(b"later").await.expect("send more");
    assert_eq!(read_exactly(&mut client, 5).await, b"later");
}

#[tokio::test]
async fn a_connect_to_a_listed_address_on_another_port_is_refused_and_reported() {
    let listed = echo_upstream("127.0.0.2").await;
    let other = echo_upstream("127.0.0.2").await;
    let (proxy, mut refusals) = proxy(&[listed.to_string()]).await;

    let answer = exchange(
        proxy,
        format!("CONNECT {other} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;

    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    let why = format!("{other} is not in this child's network allowlist");
    assert!(
        answer.ends_with(&format!("\r\n\r\nsubzero: {why}\n")),
        "{answer}"
    );
    let refused = next_refusal(&mut refusals).await;
    assert_eq!(
        refused,
        Refused {
            host: "127.0.0.2".to_owned(),
            port: other.port(),
            why
        }
    );
}

#[tokio::test]
async fn a_plain_get_is_forwarded_in_origin_form_with_connection_close() {
    let log = Log::default();
    let _capture = log.capture();
    let (upstream, received) = http_upstream(0).await;
    let (proxy, _refusals) = proxy(&[upstream.to_string()]).await;
    let request = format!(
        "GET http://{upstream}/x?secret=1 HTTP/1.1\r\nHost: {upstream}\r\n\
         Proxy-Connection: keep-alive\r\nproxy-authorization: Basic eDp5\r\n\
         Connection: keep-alive\r\nUser-Agent: test\r\n\r\n"
    );

    let answer = exchange(proxy, request.as_bytes()).await;

    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\nok"));
    let received = received.await.expect("the upstream's request");
    assert_eq!(
        String::from_utf8_lossy(&received),
        format!(
            "GET /x?secret=1 HTTP/1.1\r\nHost: {upstream}\r\nUser-Agent: test\r\nConnection: close\r\n\r\n"
        )
    );
    assert!(log.text().contains("proxy: admitted"), "{}", log.text());
    assert!(!log.text().contains("secret"), "{}", log.text());
}

#[tokio::test]
async fn a_refused_plain_get_reports_and_logs_its_host_never_its_path() {
    let log = Log::default();
    let _capture = log.capture();
    let (proxy, mut refusals) = proxy(&["example.com".to_owned()]).await;
    let request =
        "GET http://Unlisted.Invalid/x?secret=1 HTTP/1.1\r\nHost: unlisted.invalid\r\n\r\n";

    let answer = exchange(proxy, request.as_bytes()).await;

    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(!answer.contains("secret"), "{answer}");
    let refused = next_refusal(&mut refusals).await;
    assert_eq!(
        (refused.host.as_str(), refused.port),
        ("unlisted.invalid", 80)
    );
    assert!(!refused.why.contains("secret"), "{}", refused.why);
    assert!(log.text().contains("unlisted.invalid"), "{}", log.text());
    assert!(!log.text().contains("secret"), "{}", log.text());
}

#[tokio::test]
async fn a_plain_post_carries_the_body_sent_with_its_head() {
    let (upstream, received) = http_upstream(4).await;
    let (proxy, _refusals) = proxy(&[upstream.to_string()]).await;
    let request = format!("POST http://{upstream} HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody");

    let answer = exchange(proxy, request.as_bytes()).await;

    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
    let received = received.await.expect("the upstream's request");
    assert_eq!(
        String::from_utf8_lossy(&received),
        "POST / HTTP/1.1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"
    );
}

#[tokio::test]
async fn a_listed_name_resolving_to_an_unlisted_loopback_address_is_refused() {
    let upstream = echo_upstream("127.0.0.1").await;
    let port = upstream.port();
    let (proxy, mut refusals) = proxy(&[format!("localhost:{port}")]).await;

    let answer = exchange(
        proxy,
        format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;

    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(
        answer.contains("a non-public address the allowlist does not name"),
        "{answer}"
    );
    let refused = next_refusal(&mut refusals).await;
    assert_eq!((refused.host.as_str(), refused.port), ("localhost", port));
}

#[tokio::test]
async fn an_unlisted_name_is_never_resolved() {
    // Resolving `.invalid` fails: had the proxy looked it up, it would answer 502.
    let (proxy, mut refusals) = proxy(&["example.com:443".to_owned()]).await;

    let answer = exchange(proxy, b"CONNECT unlisted.invalid:443 HTTP/1.1\r\n\r\n").await;

    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(answer.contains("unlisted.invalid:443 is not in this child's network allowlist"));
    assert_eq!(next_refusal(&mut refusals).await.host, "unlisted.invalid");
}

#[tokio::test]
async fn a_listed_name_that_cannot_be_resolved_is_a_bad_gateway_not_a_refusal() {
    let (proxy, mut refusals) = proxy(&["nothing.invalid:443".to_owned()]).await;

    let answer = exchange(proxy, b"CONNECT nothing.invalid:443 HTTP/1.1\r\n\r\n").await;

    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(
        answer.ends_with("subzero: cannot resolve nothing.invalid\n"),
        "{answer}"
    );
    assert!(
        refusals.try_recv().is_err(),
        "a lookup error is not a refusal"
    );
}

#[tokio::test]
async fn a_listed_address_nothing_listens_on_is_a_bad_gateway() {
    let port = unused_port().await;
    let (proxy, _refusals) = proxy(&[format!("127.0.0.2:{port}")]).await;

    let answer = exchange(
        proxy,
        format!("CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;

    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(answer.contains(&format!("subzero: cannot connect to 127.0.0.2:{port}: ")));
}

#[tokio::test]
async fn a_connect_to_a_v6_literal_is_decided_on_the_address_without_brackets() {
    let (proxy, mut refusals) = proxy(&["127.0.0.2:443".to_owned()]).await;

    let answer = exchange(proxy, b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").await;

    assert!(answer.contains("subzero: [::1]:443 is not in this child's network allowlist\n"));
    let refused = next_refusal(&mut refusals).await;
    assert_eq!((refused.host.as_str(), refused.port), ("::1", 443));
}

#[tokio::test]
async fn an_origin_form_request_is_a_bad_request() {
    let (proxy, _refusals) = proxy(&["127.0.0.2".to_owned()]).await;

    let answer = exchange(proxy, b"GET /x HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n").await;

    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("Content-Type: text/plain\r\n"), "{answer}");
}

#[tokio::test]
async fn an_absolute_https_url_is_a_bad_request() {
    let (proxy, _refusals) = proxy(&["127.0.0.2".to_owned()]).await;

    let answer = exchange(proxy, b"GET https://127.0.0.2/ HTTP/1.1\r\n\r\n").await;

    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("CONNECT"), "{answer}");
}

#[tokio::test]
async fn an_over_long_head_is_refused_without_hanging() {
    let (proxy, _refusals) = proxy(&["127.0.0.2".to_owned()]).await;
    let mut request = b"GET http://127.0.0.2/ HTTP/1.1\r\n".to_vec();
    request.extend(std::iter::repeat_n(b"X-Filler: 0123456789abcdef\r\n", 1000).flatten());

    let answer = exchange(proxy, &request).await;

    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

#[tokio::test]
async fn a_client_that_has_not_finished_its_head_does_not_hold_up_others() {
    let (proxy, _refusals) = proxy(&["127.0.0.2".to_owned()]).await;
    let mut slow = TcpStream::connect(proxy)
        .await
        .expect("connect to the proxy");
    slow.write_all(b"CONNECT 127.0.0.2:")
        .await
        .expect("send half a head");

    let answer = exchange(proxy, b"GET / HTTP/1.1\r\n\r\n").await;

    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
}

#[test]
fn a_head_ends_at_its_blank_line_with_or_without_carriage_returns() {
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody", 0), Some(18));
    assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody", 0), Some(16));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 0), None);
}

#[test]
fn request_lines_name_their_host_and_port() {
    let host_port = |head: &str| parse_head(head.as_bytes()).map(|r| (r.host, r.port));
    let ok = |host: &str, port| Ok((host.to_owned(), port));
    assert_eq!(
        host_port("CONNECT Example.COM:443 HTTP/1.1\r\n\r\n"),
        ok("example.com", 443)
    );
    assert_eq!(
        host_port("CONNECT [::1]:8443 HTTP/1.0\r\n\r\n"),
        ok("::1", 8443)
    );
    assert_eq!(host_port("GET http://a.b HTTP/1.1\r\n\r\n"), ok("a.b", 80));
    assert_eq!(
        host_port("GET HTTP://a.b:8080?q HTTP/1.1\r\n\r\n"),
        ok("a.b", 8080)
    );
    for bad in [
        "CONNECT a.b HTTP/1.1\r\n\r\n",
        "CONNECT a.b:0 HTTP/1.1\r\n\r\n",
        "CONNECT a.b:65536 HTTP/1.1\r\n\r\n",
        "CONNECT [a.b]:443 HTTP/1.1\r\n\r\n",
        "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.b:443 HTTP/2.0\r\n\r\n",
        "CONNECT  a.b:443 HTTP/1.1\r\n\r\n",
        "GET http://user@a.b/ HTTP/1.1\r\n\r\n",
        "GET http://a b/ HTTP/1.1\r\n\r\n",
        "GET http:///x HTTP/1.1\r\n\r\n",
        "GET http://a.b/ HTTP/1.1\r\nX-Folded: a\r\n  b\r\n\r\n",
        "GET http://a.b/ HTTP/1.1\r\nNo colon\r\n\r\n",
        "GET http://a.b/ HTTP/1.1\r\nBad name : x\r\n\r\n",
    ] {
        assert!(
            parse_head(bad.as_bytes()).is_err(),
            "{bad:?} is a bad request"
        );
    }
}

#[test]
fn a_forwarded_head_is_in_origin_form_without_the_fragment() {
    let request =
        parse_head(b"GET http://a.b/p?q=1#frag HTTP/1.1\r\nHost: a.b\r\n\r\n").expect("a request");
    assert_eq!(
        request.forward.as_deref(),
        Some(&b"GET /p?q=1 HTTP/1.1\r\nHost: a.b\r\nConnection: close\r\n\r\n"[..])
    );
}
