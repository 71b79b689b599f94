//! A state directory that stops taking writes — a small tmpfs filled to its last page —
//! while a run is in flight, with the
//! real `subzero mcp`, a real SQLite file and a scripted model: the broker keeps the
//! run's result, answers every call with a typed `storage_unavailable` naming the path
//! (never `internal`), and settles the run truthfully once writes succeed again, without
//! a restart.
//!
//! A state directory that turns read-only under a running broker is staged with an ext4
//! image whose error handling is `remount-ro` and ext4's own `trigger_fs_error` (a plain
//! `mount -o remount,ro` refuses while SQLite holds the database open for writing).
//!
//! Mounting needs root and (for the image) a loop device; CI runs as root. Elsewhere the
//! tests say so and pass; with `CI` set a failed mount fails them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::faults::{RawBroker, Reaper, eventually};
use crate::support::mcp::{Env, last, last_error, p, slow_reply};
use serde_json::json;

/// A tmpfs mounted over a test's state directory, unmounted (lazily) on drop.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mount a `size`-byte tmpfs at `path`, or say why not (not root, no mount rights).
    fn mount(path: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).expect("mount point");
        let root = nix::unistd::geteuid().is_root();
        let mounted = root
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
                .arg("tmpfs")
                .arg(path)
                .status()
                .is_ok_and(|s| s.success());
        if mounted {
            return Some(Tmpfs {
                path: path.to_path_buf(),
            });
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root and must be able to mount a tmpfs for the storage-fault tests"
        );
        eprintln!(
            "SKIPPED: mounting a tmpfs needs root (or CAP_SYS_ADMIN); the storage-fault test did not run"
        );
        None
    }

    /// Fill the file system to its last page; returns the filler to delete.
    fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler).expect("filler");
        let block = vec![0u8; 64 * 1024];
        loop {
            if file.write_all(&block).is_err() {
                break;
            }
        }
        // Then byte-sized writes, so not even a partial page is left.
        let one = [0u8; 512];
        while file.write_all(&one).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn snapshot(broker: &mut RawBroker, child: &str) -> p::ChildSnapshot {
    broker.typed("subzero_get", json!({"childId": child}))
}

/// Poll until the child is no longer `running`, or `limit` passed.
fn settled(broker: &mut RawBroker, child: &str, limit: Duration) -> Option<p::ChildSnapshot> {
    let deadline = Instant::now() + limit;
    loop {
        let snap = snapshot(broker, child);
        if snap.state != p::ChildState::Running {
            return Some(snap);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

const ANSWER: &str = "the answer survived a full disk: 42";

/// Waits until the model's (slow) answer has arrived and the broker's first attempt to
/// record the run's end was refused by the store, as the broker's log says.
fn end_refused_by_the_store(env: &Env) {
    let log = env.log("broker");
    let refused =
        || std::fs::read_to_string(&log).is_ok_and(|l| l.contains("could not settle a run"));
    assert!(
        eventually(Duration::from_secs(20), refused),
        "the run's end never met the refusing store; the broker's log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Start a broker on a tmpfs state dir and spawn a child whose model answers after
/// `delay_ms`; returns once the model has the request (the run is in flight).
fn in_flight(env: &Env, reaper: &mut Reaper) -> Option<(Tmpfs, RawBroker, String)> {
    let fs = Tmpfs::mount(&env.state_dir(), "16m")?;
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    let out: p::SpawnOutput = broker.typed(
        "subzero_spawn",
        json!({"prompt": "answer", "templateId": "researcher", "model": env.model()}),
    );
    let child = out.child_id.to_string();
    assert!(
        env.server.wait_for_requests(1, Duration::from_secs(20)),
        "the model got the run's request"
    );
    Some((fs, broker, child))
}

#[test]
fn a_result_that_meets_a_full_disk_is_kept_and_settles_when_space_returns() {
    let env = Env::new(vec![slow_reply(ANSWER, 1500)]);
    let mut reaper = Reaper::new(env.dir.path());
    let Some((fs, mut broker, child)) = in_flight(&env, &mut reaper) else {
        return;
    };
    let filler = fs.fill();
    // The model answers into a full disk; the result cannot be stored yet.
    end_refused_by_the_store(&env);
    let snap = snapshot(&mut broker, &child);
    assert_eq!(snap.state, p::ChildState::Running, "{snap:#?}");

    // Every call is answered; a write names the storage problem, never `internal`.
    let err = broker.refused_with(
        "subzero_spawn",
        json!({"prompt": "another", "templateId": "researcher", "model": env.model()}),
    );
    assert_eq!(err.code, p::ErrorCode::StorageUnavailable, "{err:#?}");
    let message = err.message.as_str();
    assert!(
        message.contains(&*env.state_dir().to_string_lossy()),
        "the message names the state directory: {message}"
    );

    // Space returns: the run settles with its result, without a restart.
    std::fs::remove_file(&filler).expect("free the space");
    let snap = settled(&mut broker, &child, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("the child stayed running after space returned"));
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    let ended = last(&snap);
    assert_eq!(ended.status, p::TerminalRunStatus::Completed, "{snap:#?}");
    assert!(ended.preview.contains(ANSWER), "{snap:#?}");
    let artifact = ended
        .artifact_id
        .as_ref()
        .expect("the result is an artifact");
    let out: p::ArtifactChunk = broker.typed("subzero_output", json!({"artifactId": artifact}));
    assert!(out.text.contains(ANSWER), "{out:#?}");
    // And the store takes new work again.
    broker.ok(
        "subzero_send",
        json!({"childId": child, "message": "more", "mode": "followup"}),
    );
    drop(fs);
}

#[test]
fn calls_on_a_child_whose_settle_waits_for_space_are_answered_typed_and_it_settles_after() {
    let env = Env::new(vec![slow_reply(ANSWER, 1500)]);
    let mut reaper = Reaper::new(env.dir.path());
    let Some((fs, mut broker, child)) = in_flight(&env, &mut reaper) else {
        return;
    };
    let filler = fs.fill();
    end_refused_by_the_store(&env);
    let snap = snapshot(&mut broker, &child);
    assert_eq!(snap.state, p::ChildState::Running, "{snap:#?}");
    let run = snap.active_run_id.expect("active run").to_string();

    // Neither a stop nor a follow-up can be recorded on a full disk: typed answers,
    // and nothing changed.
    let err = broker.refused_with(
        "subzero_stop",
        json!({"childId": child, "expectedRunId": run}),
    );
    assert_eq!(err.code, p::ErrorCode::StorageUnavailable, "{err:#?}");
    let err = broker.refused_with(
        "subzero_send",
        json!({"childId": child, "message": "later", "mode": "followup"}),
    );
    assert_eq!(err.code, p::ErrorCode::StorageUnavailable, "{err:#?}");

    std::fs::remove_file(&filler).expect("free the space");
    let snap = settled(&mut broker, &child, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("the child stayed running after space returned"));
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Completed,
        "{snap:#?}"
    );
    // The field the old check named (`queuedRunIds`) does not exist, so it held whatever
    // the queue was: the typed snapshot's `queuedRuns` is what it meant.
    assert!(snap.queued_runs.is_empty(), "{snap:#?}");
    // A stop now is answered at once: the run already ended.
    let err = broker.refused_with(
        "subzero_stop",
        json!({"childId": child, "expectedRunId": run}),
    );
    assert_eq!(err.code, p::ErrorCode::NotRunning, "{err:#?}");
    drop(fs);
}

/// An ext4 image with `errors=remount-ro`, loop-mounted over a test's state directory in a
/// mount namespace of the broker's own, so the test can make it read-only under a running
/// broker (ext4's `trigger_fs_error` turns it read-only at once, even with files open for
/// writing — what a failing disk does). In the namespace every test shares, the mount would
/// be copied into the namespace of every worker and tool that other tests start meanwhile,
/// keeping the image's loop device busy after it is unmounted here, so that it could not be
/// mounted again after the repair.
struct Ext4 {
    image: PathBuf,
    path: PathBuf,
    /// Runs `subzero` with its arguments in a new mount namespace with the image mounted.
    wrapper: PathBuf,
}

impl Ext4 {
    /// Make the image beside `path`, or say why not (not root, no `mkfs.ext4`, no loop device).
    fn make(dir: &Path, path: &Path) -> Option<Ext4> {
        std::fs::create_dir_all(path).expect("mount point");
        let image = dir.join("state.img");
        let inner = dir.join("in-namespace.sh");
        let wrapper = dir.join("broker-namespace.sh");
        std::fs::write(
            &inner,
            format!(
                "#!/bin/sh\nset -e\nmount -o loop,errors=remount-ro '{}' '{}'\nchmod 700 '{}'\nexec \"$@\"\n",
                image.display(),
                path.display(),
                path.display(),
            ),
        )
        .expect("namespace script");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec unshare --mount --propagation private '{}' '{}' \"$@\"\n",
                inner.display(),
                env!("CARGO_BIN_EXE_subzero"),
            ),
        )
        .expect("wrapper");
        for script in [&inner, &wrapper] {
            std::fs::set_permissions(script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod the scripts");
        }
        let run = |cmd: &mut Command| cmd.status().is_ok_and(|s| s.success());
        let made = nix::unistd::geteuid().is_root()
            && std::fs::File::create(&image)
                .and_then(|f| f.set_len(32 * 1024 * 1024))
                .is_ok()
            && run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))
            // The image mounts (and is unmounted with its namespace).
            && run(Command::new(&wrapper).arg("--version"));
        if made {
            return Some(Ext4 {
                image,
                path: path.to_path_buf(),
                wrapper,
            });
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root and must be able to loop-mount an ext4 image for the read-only test"
        );
        eprintln!("SKIPPED: loop-mounting an ext4 image needs root and a loop device");
        None
    }

    /// `subzero mcp` over the mounted image, in its own mount namespace (which ends with the
    /// last of the broker's processes, unmounting the image).
    fn broker(&self, env: &Env, log: &str) -> RawBroker {
        let mut cmd = env.command(log);
        cmd.exe = self.wrapper.clone();
        RawBroker::start(&cmd)
    }

    /// The loop device's name under `/sys/fs/ext4/` (e.g. `loop0`), as `broker` sees it.
    fn device(&self, broker: u32) -> String {
        let mounts = std::fs::read_to_string(format!("/proc/{broker}/mounts")).expect("mounts");
        let target = self.path.to_string_lossy().into_owned();
        mounts
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?, f.next()?))
            })
            .filter(|(_, at)| *at == target)
            .map(|(dev, _)| dev.trim_start_matches("/dev/").to_owned())
            .next_back()
            .expect("the image is mounted")
    }

    /// Make the file system read-only now, under every open writer.
    fn fail_read_only(&self, broker: u32) {
        let trigger = format!("/sys/fs/ext4/{}/trigger_fs_error", self.device(broker));
        std::fs::write(&trigger, "subzero test: read-only under a running broker\n")
            .expect("trigger the ext4 error");
    }

    /// Once the broker's namespace is gone (with its last process; the image's loop device
    /// is released then), repair the image (what an operator does after the fault).
    fn repair(&self) {
        let attached = || {
            Command::new("losetup")
                .arg("-j")
                .arg(&self.image)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default()
        };
        assert!(
            eventually(Duration::from_secs(10), || attached().is_empty()),
            "the image is still attached after its broker ended: {}",
            attached()
        );
        let _ = Command::new("e2fsck")
            .args(["-f", "-y"])
            .arg(&self.image)
            .stdout(std::process::Stdio::null())
            .status();
    }
}

#[test]
fn a_state_dir_that_turns_read_only_is_refused_typed_and_the_run_is_recovered_truthfully() {
    let env = Env::new(vec![slow_reply(ANSWER, 1500)]);
    let mut reaper = Reaper::new(env.dir.path());
    let Some(fs) = Ext4::make(env.dir.path(), &env.state_dir()) else {
        return;
    };
    let mut broker = fs.broker(&env, "broker");
    reaper.broker(Some(broker.pid()));
    let out: p::SpawnOutput = broker.typed(
        "subzero_spawn",
        json!({"prompt": "answer", "templateId": "researcher", "model": env.model()}),
    );
    let child = out.child_id.to_string();
    assert!(env.server.wait_for_requests(1, Duration::from_secs(20)));
    fs.fail_read_only(broker.pid());
    end_refused_by_the_store(&env);

    // Reads still answer; every write is a typed refusal naming the path, never `internal`.
    let snap = snapshot(&mut broker, &child);
    assert_eq!(snap.state, p::ChildState::Running, "{snap:#?}");
    let run = snap.active_run_id.expect("active run").to_string();
    for (tool, args) in [
        (
            "subzero_spawn",
            json!({"prompt": "more", "templateId": "researcher", "model": env.model()}),
        ),
        (
            "subzero_stop",
            json!({"childId": child, "expectedRunId": run}),
        ),
    ] {
        let err = broker.refused_with(tool, args);
        assert_eq!(
            err.code,
            p::ErrorCode::StorageUnavailable,
            "{tool}: {err:#?}"
        );
        assert!(
            err.message.contains(&*env.state_dir().to_string_lossy()),
            "{tool}: {err:#?}"
        );
    }

    // The broker goes (the host quits); the operator repairs the file system; the next
    // broker records the run interrupted with a reason, and the child is resumable.
    drop(broker);
    fs.repair();
    let mut next = fs.broker(&env, "next");
    reaper.broker(Some(next.pid()));
    let snap = snapshot(&mut next, &child);
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Interrupted,
        "{snap:#?}"
    );
    let reason = last_error(&snap).message.as_str();
    assert!(reason.contains("broker_lost"), "{snap:#?}");
    drop(next);
    drop(fs);
}
