//! Running the `git` CLI with a clean, fixed environment.
//!
//! The broker's own calls never read the system config, never prompt, never page, take no
//! optional locks (so reading the workspace's status does not rewrite its index), and read
//! nothing on stdin unless given. The user's global config (`HOME`) still applies, as it
//! does to the user's own commands in the workspace.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::error::CheckoutError;
use super::oid::bounded;

/// Standard error kept in an error message.
const STDERR_MAX: usize = 2048;

/// Variables passed through from the broker's environment; everything else is dropped.
const PASSED: [&str; 3] = ["PATH", "HOME", "XDG_CONFIG_HOME"];

/// One git invocation's context: directory, extra variables and `-c` settings.
#[derive(Debug, Clone)]
pub(super) struct Git {
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    config: Vec<OsString>,
}

/// What a command printed, when a non-zero exit is an answer rather than a failure.
#[derive(Debug)]
pub(super) struct Finished {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
}

impl Git {
    /// Git run in `dir` (repository discovery starts there unless `GIT_DIR` is set).
    pub fn at(dir: &Path) -> Git {
        Git {
            cwd: dir.to_path_buf(),
            env: Vec::new(),
            config: Vec::new(),
        }
    }

    /// Add an environment variable.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Git {
        self.env.push((key.into(), value.as_ref().to_owned()));
        self
    }

    /// Add a `-c key=value` setting.
    pub fn config(mut self, setting: impl AsRef<OsStr>) -> Git {
        self.config.push(setting.as_ref().to_owned());
        self
    }

    /// Run to completion; a non-zero exit is a [`CheckoutError::Git`].
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Vec<u8>, CheckoutError> {
        self.run_with_input(args, None)
    }

    /// Run with `input` on stdin; a non-zero exit is a [`CheckoutError::Git`].
    pub fn run_with_input<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&[u8]>,
    ) -> Result<Vec<u8>, CheckoutError> {
        let (out, stderr) = self.output(args, input)?;
        if out.code == Some(0) {
            return Ok(out.stdout);
        }
        Err(failure(args, out.code, &stderr))
    }

    /// Run to completion and hand back the exit code; only exits above `max_ok` (or a
    /// signal) are failures.
    pub fn run_allowing<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        max_ok: i32,
    ) -> Result<Finished, CheckoutError> {
        self.allowing(args, None, max_ok)
    }

    /// [`Git::run_allowing`] with `input` on stdin.
    pub fn run_allowing_with_input<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: &[u8],
        max_ok: i32,
    ) -> Result<Finished, CheckoutError> {
        self.allowing(args, Some(input), max_ok)
    }

    fn allowing<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&[u8]>,
        max_ok: i32,
    ) -> Result<Finished, CheckoutError> {
        let (out, stderr) = self.output(args, input)?;
        match out.code {
            Some(code) if (0..=max_ok).contains(&code) => Ok(out),
            code => Err(failure(args, code, &stderr)),
        }
    }

    /// Start the command with stdout piped, for output read as a stream.
    pub fn spawn<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Child, CheckoutError> {
        self.command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.spawn_error(e))
    }

    /// Wait for a child from [`Git::spawn`] whose stdout was read; fail on a non-zero exit.
    pub fn wait<S: AsRef<OsStr>>(&self, args: &[S], mut child: Child) -> Result<(), CheckoutError> {
        let mut stderr = Vec::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_end(&mut stderr);
        }
        let status = child
            .wait()
            .map_err(|e| CheckoutError::io("waiting for git", e))?;
        match status.code() {
            Some(0) => Ok(()),
            code => Err(failure(args, code, &stderr)),
        }
    }

    fn output<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&[u8]>,
    ) -> Result<(Finished, Vec<u8>), CheckoutError> {
        let stdin = if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = self
            .command(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let writer = feed(&mut child, input);
        let output = child
            .wait_with_output()
            .map_err(|e| CheckoutError::io("waiting for git", e))?;
        if let Some(writer) = writer {
            // A broken pipe means git stopped reading; its exit status says why.
            let _ = writer.join();
        }
        let finished = Finished {
            code: output.status.code(),
            stdout: output.stdout,
        };
        Ok((finished, output.stderr))
    }

    /// A directory that is gone is the caller's problem; anything else means no git.
    fn spawn_error(&self, e: std::io::Error) -> CheckoutError {
        if !self.cwd.is_dir() {
            let context = format!("running git in {}", self.cwd.display());
            return CheckoutError::io(context, e);
        }
        CheckoutError::GitMissing { why: e.to_string() }
    }

    fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        for key in PASSED {
            if let Some(value) = std::env::var_os(key) {
                cmd.env(key, value);
            }
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("LC_ALL", "C");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        for setting in &self.config {
            cmd.arg("-c").arg(setting);
        }
        cmd.args(args).current_dir(&self.cwd);
        cmd
    }
}

/// Write `input` to the child's stdin from another thread, so a child that fills its
/// stdout pipe before reading all of stdin cannot deadlock us.
fn feed(child: &mut Child, input: Option<&[u8]>) -> Option<std::thread::JoinHandle<()>> {
    let input = input?.to_vec();
    let mut stdin = child.stdin.take()?;
    Some(std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    }))
}

fn failure<S: AsRef<OsStr>>(args: &[S], code: Option<i32>, stderr: &[u8]) -> CheckoutError {
    let command = args
        .iter()
        .take(3)
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let status = match code {
        Some(code) => format!("exit {code}"),
        None => "killed by a signal".to_owned(),
    };
    let text = String::from_utf8_lossy(stderr);
    CheckoutError::Git {
        command,
        status,
        stderr: bounded(text.trim(), STDERR_MAX).to_owned(),
    }
}
