//! What a network grant costs a tool: its first connect through the allowlist proxy (the
//! tools' network namespace → the worker's proxy → the listed host), beside the same connect
//! under `open` (straight to the host). The tool measures itself (Python's clock around
//! the connect, so its own start is not counted); the host is a listener on the host's
//! loopback, outside the namespace.

use std::net::TcpListener;
use std::path::Path;

use serde_json::json;
use subzero_testkit::Reply;

use crate::Fail;
use crate::env::{BenchEnv, settle};
use crate::stats::Samples;

/// A tool's first connect, ms: through the proxy (`CONNECT` answered) and under `open`.
pub struct FirstConnect {
    pub proxy_ms: Samples,
    pub open_ms: Samples,
}

/// The timing a tool runs: connect (through the proxy, `CONNECT` until its `200`), print ms.
const PROBE: &str = r#"
import socket, sys, time
host, port, proxy = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "proxy"
start = time.perf_counter()
if proxy:
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (host.encode(), port))
    answer = s.recv(64)
    assert b" 200 " in answer, answer
else:
    s = socket.create_connection((host, port))
print("connect-ms=%.3f" % ((time.perf_counter() - start) * 1000))
"#;

pub async fn first_connect(exe: &Path, runs: usize) -> Result<FirstConnect, Fail> {
    let listener = TcpListener::bind("127.0.0.2:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        // Accept and hold each connection until the prober closes it.
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                let _ = std::io::Read::read(&mut &stream, &mut buf);
            });
        }
    });
    let python = python()?;
    let env = BenchEnv::new(exe, Vec::new())?;
    std::fs::write(env.workspace().join("probe.py"), PROBE)?;
    env.append_config(&format!(
        "\n[templates.fetcher]\ndescription = \"Fetches\"\ninstructions = \"Fetch.\"\ntools = [\"bash\"]\nnetwork = [\"127.0.0.2:{port}\"]\n\
         \n[templates.opened]\ndescription = \"Open\"\ninstructions = \"Go.\"\ntools = [\"bash\"]\nnetwork = \"open\"\n"
    ))?;
    let s = env.broker().await?;
    let mut out = FirstConnect {
        proxy_ms: Samples::default(),
        open_ms: Samples::default(),
    };
    let mut requests = 0;
    for round in 0..=runs {
        for (template, mode) in [("fetcher", "proxy"), ("opened", "open")] {
            let command = format!("{python} probe.py 127.0.0.2 {port} {mode}");
            let args = json!({ "command": command }).to_string();
            env.server.push(Reply::tool_call("c1", "bash", &args));
            env.server.push(Reply::text("done"));
            let (child, _run) = env.spawn(&s, template, "probe").await?;
            settle(&s, &child).await?;
            requests += 2;
            let body = env
                .server
                .requests()
                .get(requests - 1)
                .map(|r| r.body.clone())
                .unwrap_or_default();
            let ms = body
                .split("connect-ms=")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit() && c != '.').next())
                .and_then(|n| n.parse::<f64>().ok())
                .ok_or_else(|| format!("the probe printed no time under `{mode}`: {body}"))?;
            // The first round warms the page cache; it is not counted.
            if round > 0 {
                match mode {
                    "proxy" => out.proxy_ms.push(ms),
                    _ => out.open_ms.push(ms),
                }
            }
        }
    }
    s.close().await?;
    Ok(out)
}

/// A Python every tool process can run (not one under a 0700 home).
fn python() -> Result<String, Fail> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .map(str::to_owned)
        .ok_or_else(|| "the network figures need /usr/bin/python3".into())
}
