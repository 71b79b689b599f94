//! The workspace's git repository as the soak sees it: made with one commit before any
//! broker starts (an isolated spawn needs a repository with a commit), and read by the
//! checks of isolated checkouts ([`crate::checkouts`]) with the `git` CLI, never written
//! again by the soak.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Who the soak's one commit is by.
const IDENTITY: [&str; 6] = [
    "-c",
    "user.name=Subzero soak",
    "-c",
    "user.email=soak@localhost",
    "-c",
    "commit.gpgsign=false",
];

/// `git` in `dir`, reading neither the system's nor the user's config; its standard output
/// when it exits 0.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "core.quotepath=off"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} in {}: {}: {}",
            args.join(" "),
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Makes `workspace` a repository whose one commit holds every file in it.
pub fn init(workspace: &Path) -> Result<(), String> {
    git(workspace, &["init", "-q", "-b", "main"])?;
    git(workspace, &["add", "-A"])?;
    let mut commit: Vec<&str> = IDENTITY.to_vec();
    commit.extend(["commit", "-q", "-m", "The soak's workspace"]);
    git(workspace, &commit)?;
    Ok(())
}

/// The commit `name` points at, if it exists.
pub fn ref_target(workspace: &Path, name: &str) -> Option<String> {
    git(workspace, &["rev-parse", "--verify", "--quiet", name])
        .ok()
        .map(|out| out.trim().to_owned())
}

/// The message of `commit` in the workspace's repository, without its trailing newlines.
pub fn commit_message(workspace: &Path, commit: &str) -> Option<String> {
    git(workspace, &["log", "-1", "--format=%B", commit, "--"])
        .ok()
        .map(|out| out.trim_end().to_owned())
}

/// The lines the change `base..head` adds, by path (a change of the soak's coders only
/// ever appends). `None` when git cannot read either commit.
pub fn added_lines(
    workspace: &Path,
    base: &str,
    head: &str,
) -> Option<BTreeMap<PathBuf, Vec<String>>> {
    let diff = git(
        workspace,
        &[
            "diff",
            "--no-ext-diff",
            "--no-color",
            "--no-renames",
            "-U0",
            base,
            head,
            "--",
        ],
    )
    .ok()?;
    let mut added: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    let mut path: Option<PathBuf> = None;
    for line in diff.lines() {
        if let Some(to) = line.strip_prefix("+++ ") {
            path = to.strip_prefix("b/").map(PathBuf::from);
        } else if line.starts_with("--- ") || line.starts_with("diff ") {
            continue;
        } else if let (Some(text), Some(path)) = (line.strip_prefix('+'), &path) {
            added.entry(path.clone()).or_default().push(text.to_owned());
        }
    }
    Some(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_as_the_lines_it_appends() {
        let dir = tempfile::tempdir().expect("a directory");
        let ws = dir.path();
        std::fs::write(ws.join("a.txt"), "one\n").expect("a file");
        init(ws).expect("a repository");
        let base = ref_target(ws, "HEAD").expect("a head");
        std::fs::write(ws.join("a.txt"), "one\ntwo\nthree\n").expect("an edit");
        std::fs::create_dir(ws.join("n")).expect("a directory");
        std::fs::write(ws.join("n/b.txt"), "four\n").expect("a new file");
        git(ws, &["add", "-A"]).expect("staged");
        let mut commit: Vec<&str> = IDENTITY.to_vec();
        commit.extend(["commit", "-q", "-m", "two lines"]);
        git(ws, &commit).expect("committed");
        let head = ref_target(ws, "HEAD").expect("a head");
        assert_eq!(commit_message(ws, &head).as_deref(), Some("two lines"));
        let added = added_lines(ws, &base, &head).expect("a diff");
        assert_eq!(
            added,
            BTreeMap::from([
                (
                    PathBuf::from("a.txt"),
                    vec!["two".to_owned(), "three".to_owned()]
                ),
                (PathBuf::from("n/b.txt"), vec!["four".to_owned()]),
            ])
        );
        assert_eq!(ref_target(ws, "refs/subzero/children/nobody"), None);
    }
}
