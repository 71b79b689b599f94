//! A hostile tool inside an isolated child's sandbox: it cannot reach another child's
//! checkout, and what it plants in its own checkout's git configuration never runs in the
//! broker when the change is recorded and applied.

use std::path::Path;

use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_child_cannot_write_another_childs_checkout() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let victim = g
        .isolated_coder(&s, "PLAN write mine.txt the victim's\\n")
        .await;
    let snap = settled_child(&s, &victim).await;
    let victim_path = checkout(&snap).path.clone();
    let target = Path::new(&victim_path).join("mine.txt");
    let plan = format!(
        "PLAN bash echo overwritten > {} ; echo planted > {}/planted.txt",
        target.display(),
        victim_path
    );
    let attacker = g.isolated_coder(&s, &plan).await;
    settled_child(&s, &attacker).await;
    assert_eq!(
        std::fs::read_to_string(&target).expect("the victim's file"),
        "the victim's\n",
        "another child's checkout was written"
    );
    assert!(!Path::new(&victim_path).join("planted.txt").exists());
    // The victim's change is still exactly what it made.
    let landed = apply(&s, json!({"childId": victim})).await;
    assert!(!landed.is_error, "{}", landed.text);
    assert_eq!(
        std::fs::read_to_string(g.workspace().join("mine.txt")).expect("landed"),
        "the victim's\n"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_and_fsmonitor_a_child_plants_in_its_checkout_never_run_in_the_broker() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let marker = g.env.dir.path().join("pwned");
    let plan = format!(
        "PLAN bash git config core.fsmonitor 'touch {m}.fsmonitor' && git config core.hooksPath hooks && mkdir -p hooks .git/hooks && for h in pre-commit post-commit post-index-change post-checkout post-merge reference-transaction; do printf '#!/bin/sh\\ntouch {m}.hook\\n' > hooks/$h; cp hooks/$h .git/hooks/$h; chmod +x hooks/$h .git/hooks/$h; done && echo '* filter=evil' > .gitattributes && git config filter.evil.clean 'touch {m}.filter; cat' && echo changed > shared.txt",
        m = marker.display()
    );
    let child = g.isolated_coder(&s, &plan).await;
    let snap = settled_child(&s, &child).await;
    let co = checkout(&snap);
    assert_eq!(co.state, p::CheckoutState::SettledChanged, "{snap:#?}");
    let landed = apply(
        &s,
        json!({"childId": child, "commitMessage": "from a hostile child"}),
    )
    .await;
    assert!(!landed.is_error, "{}", landed.text);
    let planted: Vec<_> = std::fs::read_dir(g.env.dir.path())
        .expect("temp dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pwned"))
        .collect();
    assert!(
        planted.is_empty(),
        "the broker ran the child's git config: {planted:?}"
    );
    assert_eq!(
        std::fs::read_to_string(g.workspace().join("shared.txt")).expect("landed"),
        "changed\n"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_submodule_an_included_env_file_and_a_shared_node_modules_reach_the_child_but_not_its_change()
 {
    let g = GitEnv::new();
    let ws = g.workspace();
    // A library repository beside the workspace, added as a submodule.
    let lib = g.env.dir.path().join("lib");
    std::fs::create_dir_all(&lib).expect("lib");
    git(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "from the submodule\n").expect("lib.txt");
    git(&lib, &["add", "-A"]);
    git(&lib, &["commit", "-q", "-m", "lib"]);
    let lib_url = lib.to_string_lossy().into_owned();
    git(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &lib_url,
            "vendor/lib",
        ],
    );
    std::fs::write(ws.join(".gitignore"), "ignored/\n.env\nnode_modules/\n").expect("ignore");
    git(&ws, &["add", "-A"]);
    git(
        &ws,
        &["commit", "-q", "-m", "ignore env and modules; vendor lib"],
    );
    std::fs::write(ws.join(".env"), "TOKEN=local\n").expect(".env");
    std::fs::create_dir_all(ws.join("node_modules/left-pad")).expect("node_modules");
    std::fs::write(
        ws.join("node_modules/left-pad/index.js"),
        "module.exports = 1;\n",
    )
    .expect("module");
    let config = std::fs::read_to_string(g.env.config()).expect("config");
    std::fs::write(
        g.env.config(),
        format!("{config}\n[isolation]\ninclude = [\".env\"]\n"),
    )
    .expect("config");
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let plan = "PLAN bash cat .env node_modules/left-pad/index.js vendor/lib/lib.txt > seen.txt; echo x >> node_modules/left-pad/index.js";
    let child = g.isolated_coder(&s, plan).await;
    let snap = settled_child(&s, &child).await;
    let co = checkout(&snap);
    assert_eq!(
        std::fs::read_to_string(Path::new(&co.path).join("seen.txt")).expect("seen"),
        "TOKEN=local\nmodule.exports = 1;\nfrom the submodule\n",
        "the child sees the included .env, the shared node_modules and the submodule"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("node_modules/left-pad/index.js")).expect("module"),
        "module.exports = 1;\n",
        "a shared directory is read-only to the child"
    );
    let change = co.change.as_ref().expect("seen.txt is a change");
    assert_eq!(change.files_changed, 1, "only seen.txt: {co:#?}");
    s.close().await.expect("close");
}
