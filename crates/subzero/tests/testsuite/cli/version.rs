//! What the binaries say they are: `subzero`, `subzero-worker` and `subzero-hold` print one
//! version line (version, commit, target), and `subzero doctor` warns when the binaries beside
//! each other come from different builds.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::cli::*;

const BINARIES: [&str; 3] = ["subzero", "subzero-worker", "subzero-hold"];

fn version_of(exe: &Path) -> String {
    let out = Command::new(exe).arg("--version").output().expect("runs");
    assert!(out.status.success(), "{}: {out:?}", exe.display());
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn built(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_subzero"))
        .parent()
        .expect("target dir")
        .join(name)
}

#[test]
fn the_three_binaries_print_one_version_line_naming_commit_and_target() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let lines: Vec<String> = BINARIES.iter().map(|b| version_of(&built(b))).collect();
    let tails: Vec<&str> = lines
        .iter()
        .zip(BINARIES)
        .map(|(line, name)| line.strip_prefix(name).expect("the name first").trim())
        .collect();
    assert!(tails.iter().all(|t| *t == tails[0]), "{lines:?}");
    let expected = format!(
        "{} ({}, {}-",
        env!("CARGO_PKG_VERSION"),
        commit.as_deref().map_or("unknown", |c| &c[..12]),
        std::env::consts::ARCH
    );
    assert!(
        tails[0].starts_with(&expected),
        "{} against {expected}",
        tails[0]
    );
}

#[test]
fn doctor_warns_when_the_binaries_beside_it_come_from_different_builds() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    for name in ["subzero", "subzero-worker"] {
        let to = dir.path().join(name);
        std::fs::hard_link(built(name), &to)
            .or_else(|_| std::fs::copy(built(name), &to).map(|_| ()))
            .expect("place the binary");
    }
    let state = dir.path().join("state");
    let config = dir.path().join("config.toml");
    let run = |dir: &Path| {
        let out = Command::new(dir.join("subzero"))
            .args(["doctor", "--json", "--state-dir"])
            .arg(&state)
            .arg("--config")
            .arg(&config)
            .env_remove("SUBZERO_STATE_DIR")
            .output()
            .expect("doctor runs");
        let report: DoctorReport = parsed_of(&out);
        let check = checks(&report, "build");
        let check = check.first().expect("a build check");
        (check.status, check.detail.clone(), check.fix.clone())
    };
    // An older `subzero-hold`: it prints no version line.
    let hold = dir.path().join("subzero-hold");
    std::fs::write(
        &hold,
        "#!/bin/sh\necho 'subzero-hold: not run by hand' >&2\nexit 2\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&hold).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hold, perms).unwrap();
    let (status, detail, fix) = run(dir.path());
    assert_eq!(status, Status::Warn, "{detail}");
    assert!(detail.contains("subzero-hold"), "{detail}");
    assert!(
        fix.as_deref().is_some_and(|f| f.contains("one build")),
        "{fix:?}"
    );
    // The real one: one build again.
    std::fs::remove_file(&hold).unwrap();
    std::fs::hard_link(built("subzero-hold"), &hold)
        .or_else(|_| std::fs::copy(built("subzero-hold"), &hold).map(|_| ()))
        .unwrap();
    let (status, detail, _) = run(dir.path());
    assert_eq!(status, Status::Pass, "{detail}");
}
