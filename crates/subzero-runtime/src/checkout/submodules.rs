//! Submodules in a checkout, cloned from the workspace's own submodule checkouts where
//! they exist (offline, and with commits not pushed anywhere yet).

use std::path::Path;

use super::error::CheckoutError;
use super::git::Git;
use super::oid::nul_records;

/// One submodule of the base tree.
#[derive(Debug)]
struct Submodule {
    name: String,
    path: String,
}

/// Initialize every submodule of the checkout's tree, recursively; a failure names the
/// submodule.
pub(super) fn init_submodules(workdir: &Path, checkout: &Path) -> Result<(), CheckoutError> {
    if !checkout.join(".gitmodules").is_file() {
        return Ok(());
    }
    let git = Git::at(checkout)
        .config("protocol.file.allow=always")
        .config("core.hooksPath=/dev/null");
    for sub in declared(&git)? {
        if !is_gitlink(&git, &sub.path)? {
            continue;
        }
        let local = workdir.join(&sub.path);
        if local.join(".git").exists() {
            let key = format!("submodule.{}.url", sub.name);
            git.run(&["config".as_ref(), key.as_ref(), local.as_os_str()])?;
        }
        let update = [
            "submodule",
            "update",
            "--init",
            "--recursive",
            "--quiet",
            "--",
        ];
        let mut args: Vec<&str> = update.to_vec();
        args.push(&sub.path);
        git.run(&args).map_err(|e| CheckoutError::Submodule {
            name: sub.name.clone(),
            path: sub.path.clone(),
            detail: match e {
                CheckoutError::Git { stderr, .. } => stderr,
                other => other.to_string(),
            },
        })?;
    }
    Ok(())
}

/// The submodules `.gitmodules` declares (name and path).
fn declared(git: &Git) -> Result<Vec<Submodule>, CheckoutError> {
    let out = git.run_allowing(
        &[
            "config",
            "-z",
            "--file",
            ".gitmodules",
            "--get-regexp",
            r"^submodule\..*\.path$",
        ],
        1,
    )?;
    let mut subs = Vec::new();
    for record in nul_records(&out.stdout) {
        let text = String::from_utf8_lossy(record);
        let Some((key, path)) = text.split_once('\n') else {
            continue;
        };
        let name = key
            .strip_prefix("submodule.")
            .and_then(|k| k.strip_suffix(".path"));
        if let Some(name) = name {
            subs.push(Submodule {
                name: name.to_owned(),
                path: path.to_owned(),
            });
        }
    }
    Ok(subs)
}

fn is_gitlink(git: &Git, path: &str) -> Result<bool, CheckoutError> {
    let spec = format!(":(literal){path}");
    let out = git.run(&["ls-files", "-s", "--", &spec])?;
    Ok(out.starts_with(b"160000 "))
}
