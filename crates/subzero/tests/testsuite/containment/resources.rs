//! A tool tree is bounded by the kernel: a fork loop, an allocation loop, a 10 GB `dd` and
//! a descriptor leak in a child's `bash` each hit the bound of the child's template
//! (`tool_limits`) and get the kernel's error as their tool result, while the run goes on
//! and the broker stays responsive. Tried as root (cgroup v1 `pids` and `memory` where the
//! machine mounts them, rlimits otherwise) and as `nobody` (rlimits, the process limit in
//! the worker's own user namespace). Each probe is bounded itself, so a missing bound
//! cannot take the machine down.

use std::time::Duration;

use crate::support;
use crate::support::containment::{Case, Path_};
use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

const PROCESSES: u64 = 64;
const MEMORY: u64 = 256 << 20;
const FILE_SIZE: u64 = 64 << 20;
const OPEN_FILES: u64 = 16;

/// Forks up to 200 sleepers (each killed again at the end) and reports how many started
/// and the errno that stopped it.
const FORK_LOOP: &str = r#"python3 - > fork.txt 2>&1 <<'EOF'
import os, time
pids, err = [], None
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    pids.append(pid)
print("started", len(pids), "errno", err)
for pid in pids:
    os.kill(pid, 9)
for pid in pids:
    os.waitpid(pid, 0)
EOF"#;

/// Allocates (and touches) up to 2 GiB in 32 MiB steps.
const ALLOCATION_LOOP: &str = r#"python3 - > alloc.txt 2>&1 <<'EOF'
held = []
try:
    for _ in range(64):
        held.append(bytearray(32 << 20))
    print("allocated", len(held))
except MemoryError:
    print("MemoryError after", len(held))
EOF
echo "exit=$?" >> alloc.txt"#;

/// Writes up to 10 GB (for at most 30 s) and reports what dd said and the size left.
const BIG_DD: &str = "timeout 30 dd if=/dev/zero of=big.bin bs=1M count=10240 > dd.txt 2>&1; echo \"size=$(stat -c %s big.bin)\" >> dd.txt; rm -f big.bin";

/// Opens up to 200 descriptors.
const DESCRIPTOR_LEAK: &str = r#"python3 - > fds.txt 2>&1 <<'EOF'
import os
held, err = [], None
for _ in range(200):
    try:
        held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = e.errno
        break
print("opened", len(held), "errno", err)
EOF"#;

fn bounded_template() -> String {
    format!(
        "\n[templates.bounded]\ndescription = \"A coder with small tool limits\"\ninstructions = \"Run the commands.\"\ntools = [\"bash\"]\ntool_limits = {{ processes = {PROCESSES}, memory_bytes = {MEMORY}, file_size_bytes = {FILE_SIZE}, open_files = {OPEN_FILES} }}\n"
    )
}

fn number_after(text: &str, word: &str) -> Option<u64> {
    text.split(word)
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

async fn a_tool_tree_past_its_bounds_gets_the_kernels_errors(path: Path_) {
    let case = Case::new(path);
    let env = &case.env;
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(env.config(), config + &bounded_template()).expect("config");
    if let Some(user) = case.user {
        support::containment::chown_tree(&env.config(), user);
    }
    for (i, command) in [FORK_LOOP, ALLOCATION_LOOP, BIG_DD, DESCRIPTOR_LEAK]
        .iter()
        .enumerate()
    {
        env.server.push(Reply::tool_call(
            &format!("call_{i}"),
            "bash",
            &json!({"command": command}).to_string(),
        ));
    }
    env.server.push(Reply::text("bounded"));
    let mut reaper = Reaper::new(env.dir.path());
    let s = case.broker("broker").await;
    reaper.broker(s.pid());

    let (child, _) = spawn(&s, env, "bounded", "Try the bounds").await;
    let snap = settled(&s, &child, Duration::from_secs(180)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let read = |name: &str| {
        std::fs::read_to_string(env.workspace().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };

    let fork = read("fork.txt");
    let started = number_after(&fork, "started").expect("started");
    assert!(started < PROCESSES, "{started} processes started: {fork}");
    assert_eq!(number_after(&fork, "errno"), Some(11), "EAGAIN: {fork}");

    let alloc = read("alloc.txt");
    let killed_by_the_cgroup = alloc.contains("exit=137");
    let refused = alloc.contains("MemoryError after");
    assert!(
        killed_by_the_cgroup || refused,
        "the allocation loop was not bounded: {alloc}"
    );
    if let Some(held) = number_after(&alloc, "MemoryError after") {
        assert!(held * 32 <= MEMORY >> 20, "{held} × 32 MiB held: {alloc}");
    }

    let dd = read("dd.txt");
    assert!(dd.contains("File too large"), "{dd}");
    assert_eq!(number_after(&dd, "size="), Some(FILE_SIZE), "{dd}");

    let fds = read("fds.txt");
    let opened = number_after(&fds, "opened").expect("opened");
    assert!(opened < OPEN_FILES, "{opened} descriptors: {fds}");
    assert_eq!(number_after(&fds, "errno"), Some(24), "EMFILE: {fds}");

    // The broker answers at once and the receipts name each bound.
    let info = broker_info(&s).await;
    assert!(
        info.enforcement
            .containment
            .as_ref()
            .is_some_and(|c| c.resources.is_some())
    );
    let snap = receipts(&s, &child).await;
    let resources = resources_of(&snap);
    for (key, bound, limit) in [
        ("processes", &resources.processes, PROCESSES),
        ("memory", &resources.memory, MEMORY),
        ("fileSize", &resources.file_size, FILE_SIZE),
        ("openFiles", &resources.open_files, OPEN_FILES),
    ] {
        assert_eq!(
            bound.limit.map(|l| l.get()),
            Some(limit),
            "{key}: {resources:#?}"
        );
        assert_ne!(bound.scope, p::ResourceScope::None, "{key}: {resources:#?}");
    }
    // A child without tool_limits gets the shipped defaults.
    env.server.push(Reply::text("default"));
    let (plain, _) = spawn(&s, env, "coder", "Say default").await;
    settled(&s, &plain, Duration::from_secs(60)).await;
    let plain = receipts(&s, &plain).await;
    assert_eq!(
        resources_of(&plain).processes.limit.map(|l| l.get()),
        Some(4096),
        "{:#?}",
        plain.containment
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_pid_namespace_a_tool_tree_past_its_bounds_gets_the_kernels_errors() {
    a_tool_tree_past_its_bounds_gets_the_kernels_errors(Path_::Namespace).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn as_an_unprivileged_user_a_tool_tree_past_its_bounds_gets_the_kernels_errors() {
    a_tool_tree_past_its_bounds_gets_the_kernels_errors(Path_::NamespaceUnprivileged).await;
}

/// The resource receipt of a child's snapshot.
fn resources_of(snap: &p::ChildSnapshot) -> &p::ResourceReceipt {
    snap.containment
        .as_ref()
        .and_then(|c| c.resources.as_ref())
        .unwrap_or_else(|| panic!("no resource receipt: {snap:#?}"))
}
