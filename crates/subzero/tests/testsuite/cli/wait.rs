//! `subzero wait CHILD`: blocks while a real broker's child works, prints the settled run
//! once it has ended, and ends with the process that started it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::cli::*;
use crate::support::mcp::*;
use serde_json::Value;
use subzero_testkit::Reply;

#[tokio::test(flavor = "multi_thread")]
async fn wait_prints_the_run_once_it_has_ended() {
    let env = Env::new(vec![slow_reply("Done after a while.", 1500)]);
    let s = env.broker("broker").await;
    let (child, run) = spawn(&s, &env, "researcher", "Take a while.").await;
    let started = Instant::now();
    let out = subzero()
        .args(["wait", &child, "--state-dir"])
        .arg(env.state_dir())
        .output()
        .expect("wait runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let waited: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(waited["childId"], child.as_str());
    assert_eq!(waited["run"]["runId"], run.as_str());
    assert_eq!(waited["run"]["status"], "completed");
    assert_eq!(waited["run"]["preview"], "Done after a while.");
    assert_eq!(waited["label"], "Take a while.");
    let snap = snapshot(&s, &child).await;
    assert_eq!(
        snap.state,
        p::ChildState::Ready,
        "it returned only once the run ended"
    );
    eprintln!("wait returned after {:?}", started.elapsed());
    // An ended run answers at once; an unknown run or child is not_found.
    let again = subzero()
        .args(["wait", &child, "--run", &run, "--state-dir"])
        .arg(env.state_dir())
        .output()
        .expect("wait runs");
    assert_eq!(again.stdout, out.stdout);
    let other = format!("run_{}", "0".repeat(26));
    let missing = subzero()
        .args(["wait", &child, "--run", &other, "--state-dir"])
        .arg(env.state_dir())
        .output()
        .expect("wait runs");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("error[not_found]"));
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_ends_with_the_process_that_started_it() {
    let env = Env::new(vec![Reply::Hang]);
    let s = env.broker("broker").await;
    let (child, _) = spawn(&s, &env, "researcher", "Never ends.").await;
    // A shell starts the waiter and is killed: the waiter must not poll on for ever.
    let exe = env!("CARGO_BIN_EXE_subzero");
    let state = env.state_dir();
    let script = format!(
        "'{exe}' wait {child} --state-dir '{}' & echo $!; wait",
        state.display()
    );
    let mut shell = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(shell.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let waiter: i32 = line.trim().parse().expect("the waiter's pid");
    std::thread::sleep(Duration::from_millis(500));
    let alive = |pid: i32| {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    };
    assert!(alive(waiter), "the waiter waits while the run works");
    shell.kill().expect("kill the shell");
    let _ = shell.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(waiter) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(waiter),
        "the waiter outlived the process that started it"
    );
    s.close().await.expect("close");
}
