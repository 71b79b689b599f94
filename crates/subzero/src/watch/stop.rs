//! Stopping a run from `watch`, which is not the broker that owns the child.
//!
//! A run is stopped by the broker that owns its child: only that broker holds the worker's
//! control pipe, and a stop from another broker is refused `busy` (docs/architecture.md,
//! `subzero_stop`). So `watch` decides from the owner's liveness lock
//! (`<state>/locks/owners/<token>.lock`, held by the owning broker while it lives):
//! - **the owner is alive** (a process holds its lock): nothing is changed. The answer names
//!   that broker's pid and the host process that started it, and what stops the run: the
//!   parent agent in that host calling `subzero_stop`, or ending that host's session (its
//!   broker stops every run it owns as it exits).
//! - **no live owner** (its host died and took the broker with it): `watch` starts
//!   `subzero mcp` for the child's workspace, exactly as a second host window would, and
//!   calls `subzero_stop` over MCP. That broker proves the owner dead, records the lost run
//!   (`interrupted`, `broker_lost: …`), and answers; `watch` shows the answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use subzero_protocol as p;
use subzero_runtime::locks::holders;
use subzero_runtime::mcp::client::{BrokerCommand, McpSession};
use subzero_runtime::paths::StatePaths;

/// How long `subzero_stop` waits for the worker's confirmation (`waitMs`).
const STOP_WAIT_MS: u64 = 10_000;
/// The whole MCP exchange: start, handshake, stop, close.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(30);

/// The run to stop and where its child lives.
#[derive(Clone, Debug)]
pub struct StopTarget {
    /// `ch_…`.
    pub child: String,
    /// The active run (`expectedRunId`).
    pub run: String,
    /// The child's workspace (the broker that stops it serves this one).
    pub workspace: PathBuf,
    /// The owning broker's token, when a broker owns the child.
    pub owner_token: Option<String>,
}

/// What a stop needs besides the target: the state directory and the configuration a
/// broker started from `watch` reads.
#[derive(Clone, Debug)]
pub struct StopContext {
    /// The state directory layout (the owner locks live there).
    pub paths: StatePaths,
    /// The configuration file.
    pub config: PathBuf,
}

/// How a stop ended, for the message `watch` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopOutcome {
    /// A live broker owns the child: nothing was changed; the text says what to do.
    Refused(String),
    /// The broker answered (stopped, requested, or a typed error).
    Answered(String),
    /// Starting or talking to the broker failed.
    Failed(String),
}

impl StopOutcome {
    /// The message.
    pub fn text(&self) -> &str {
        match self {
            StopOutcome::Refused(t) | StopOutcome::Answered(t) | StopOutcome::Failed(t) => t,
        }
    }
}

/// Stop `target`'s run the way its ownership allows (see the module documentation).
pub async fn stop(target: &StopTarget, context: &StopContext) -> StopOutcome {
    if let Some(owner) = live_owner(target, &context.paths) {
        return StopOutcome::Refused(refusal(target, &owner));
    }
    match tokio::time::timeout(EXCHANGE_LIMIT, through_a_broker(target, context)).await {
        Ok(outcome) => outcome,
        Err(_) => StopOutcome::Failed(format!(
            "the broker started to stop {} did not answer within {} s",
            target.run,
            EXCHANGE_LIMIT.as_secs()
        )),
    }
}

/// The broker process that holds the owner's liveness lock, and the process that started it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The broker's pid and command name.
    pub pid: u32,
    pub command: String,
    /// Its parent (the host), when readable.
    pub parent: Option<(u32, String)>,
}

fn live_owner(target: &StopTarget, paths: &StatePaths) -> Option<Owner> {
    let token = target.owner_token.as_deref()?;
    // Only a token that can name a file (the store writes `bk_<ulid>`).
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return None;
    }
    let holder = holders(&paths.owner_lock(token)).into_iter().next()?;
    Some(Owner {
        pid: holder.pid,
        command: holder.command,
        parent: parent_of(holder.pid),
    })
}

/// The parent pid and command name of `pid`, from `/proc`.
fn parent_of(pid: u32) -> Option<(u32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: the command may hold spaces and parentheses.
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
    let comm = std::fs::read_to_string(format!("/proc/{ppid}/comm")).ok()?;
    Some((ppid, comm.trim().to_owned()))
}

fn refusal(target: &StopTarget, owner: &Owner) -> String {
    let host = match &owner.parent {
        Some((pid, command)) => format!(", started by {command} (pid {pid})"),
        None => String::new(),
    };
    format!(
        "Not stopped: {child} is run by a live Subzero broker (pid {pid}{host}); only the \
         broker that owns a child can stop its run. Ask the parent agent in that host to call \
         subzero_stop for {run}, or end that host's session: its broker stops every run it \
         owns as it exits (as `kill -TERM {pid}` does, which also ends that host's Subzero \
         tools). Nothing was changed.",
        child = target.child,
        run = target.run,
        pid = owner.pid,
    )
}

async fn through_a_broker(target: &StopTarget, context: &StopContext) -> StopOutcome {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return StopOutcome::Failed(format!("cannot find the subzero executable: {e}")),
    };
    let log = std::env::temp_dir().join(format!("subzero-watch-stop-{}.log", std::process::id()));
    let command = BrokerCommand {
        exe,
        workspace: target.workspace.clone(),
        state_dir: context.paths.root().to_path_buf(),
        config: context.config.clone(),
        env: Vec::new(),
        log_file: Some(log.clone()),
    };
    let session = match McpSession::start(&command).await {
        Ok(session) => session,
        Err(e) => return StopOutcome::Failed(broker_failed(&format!("{e}"), &log)),
    };
    let reply = session
        .call(
            "subzero_stop",
            json!({"childId": target.child, "expectedRunId": target.run, "waitMs": STOP_WAIT_MS}),
        )
        .await;
    let _ = session.close().await;
    let outcome = match reply {
        Ok(reply) if reply.is_error => {
            let body = serde_json::from_value::<p::ErrorBody>(reply.structured).ok();
            let code = body
                .as_ref()
                .map_or("error".to_owned(), |b| b.code.to_string());
            let message = body
                .as_ref()
                .map_or(reply.text.as_str(), |b| b.message.as_str());
            StopOutcome::Answered(refused_by_broker(target, &code, message))
        }
        Ok(reply) => StopOutcome::Answered(answered(
            target,
            serde_json::from_value(reply.structured).ok(),
        )),
        Err(e) => return StopOutcome::Failed(broker_failed(&format!("{e}"), &log)),
    };
    let _ = std::fs::remove_file(&log);
    outcome
}

/// What the broker's `subzero_stop` answer says (`None`: an answer outside its type).
fn answered(target: &StopTarget, output: Option<p::StopOutput>) -> String {
    match output {
        Some(out) if out.confirmed => format!(
            "Stopped {}: the worker confirmed, its tool processes are gone (status {}).",
            target.run, out.status
        ),
        output => format!(
            "Stop requested for {} (status {}); the worker has not confirmed yet.",
            target.run,
            output.map_or("stop_requested".to_owned(), |out| out.status.to_string())
        ),
    }
}

/// What a typed refusal from the broker means here. A run whose broker is gone has already
/// ended by the time the stop is decided: the broker recorded it `interrupted` first.
fn refused_by_broker(target: &StopTarget, code: &str, message: &str) -> String {
    match code {
        "interrupted" => format!(
            "Nothing left to stop: {} had already ended. Its broker was gone, so the broker \
             watch started recorded the run interrupted (broker_lost); nothing is running, \
             and subzero_resume continues the child.",
            target.run
        ),
        "not_running" => format!("Nothing left to stop: {} had already ended.", target.run),
        _ => format!("Not stopped: {code}: {message}"),
    }
}

/// A failed exchange, with the end of the broker's log (kept for the user).
fn broker_failed(error: &str, log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!(
        "could not stop through a broker ({error}); its log is {}{}{}",
        log.display(),
        if tail.is_empty() { "" } else { ": " },
        tail.join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> StopTarget {
        StopTarget {
            child: "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D".into(),
            run: "run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0E".into(),
            workspace: PathBuf::from("/w"),
            owner_token: Some("bk_01JH8Z6Q2V3W4X5Y6Z7A8B9C0F".into()),
        }
    }

    #[test]
    fn a_refusal_names_the_broker_its_host_and_what_stops_the_run() {
        let owner = Owner {
            pid: 4821,
            command: "subzero".into(),
            parent: Some((4800, "claude".into())),
        };
        let text = refusal(&target(), &owner);
        assert!(
            text.contains("pid 4821, started by claude (pid 4800)"),
            "{text}"
        );
        assert!(text.contains("subzero_stop"), "{text}");
        assert!(text.contains("run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0E"), "{text}");
        assert!(text.contains("Nothing was changed"), "{text}");
    }

    #[test]
    fn a_token_that_cannot_name_a_lock_file_has_no_live_owner() {
        let paths = StatePaths::existing("/nonexistent-subzero-state");
        let mut t = target();
        t.owner_token = Some("../../etc/passwd".into());
        assert_eq!(live_owner(&t, &paths), None);
        t.owner_token = None;
        assert_eq!(live_owner(&t, &paths), None);
    }

    #[test]
    fn the_parent_of_this_process_is_readable() {
        let (ppid, _) = parent_of(std::process::id()).expect("own stat");
        assert_eq!(ppid, std::os::unix::process::parent_id());
    }
}
