//! The refs the caller names (`refs/subzero/…`), which keep bases and recorded changes
//! from being pruned by `git gc`.

use super::error::CheckoutError;
use super::git::Git;
use super::oid::Oid;

/// Refuse anything but a well-formed full ref under `refs/`.
pub(super) fn check_ref_name(git: &Git, name: &str) -> Result<(), CheckoutError> {
    let invalid = || CheckoutError::InvalidRefName {
        name: name.to_owned(),
    };
    if !name.starts_with("refs/") || name.starts_with('-') {
        return Err(invalid());
    }
    let out = git.run_allowing(&["check-ref-format", name], 1)?;
    match out.code {
        Some(0) => Ok(()),
        _ => Err(invalid()),
    }
}

/// Point `name` at `oid`, creating or moving it.
pub(super) fn set_ref(git: &Git, name: &str, oid: &Oid) -> Result<(), CheckoutError> {
    check_ref_name(git, name)?;
    git.run(&["update-ref", "-m", "subzero", name, oid.as_str()])?;
    Ok(())
}

/// Every ref whose name starts with `prefix` (`refs/subzero/`) in the repository at
/// `workspace`, in git's order (for `subzero gc`, which says what it would delete before it
/// does, with one git run per workspace).
pub fn refs_under(workspace: &std::path::Path, prefix: &str) -> Result<Vec<String>, CheckoutError> {
    if !prefix.starts_with("refs/") {
        return Err(CheckoutError::InvalidRefName {
            name: prefix.to_owned(),
        });
    }
    let git = Git::at(workspace);
    let out = git.run(&["for-each-ref", "--format=%(refname)", prefix])?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter(|name| name.starts_with(prefix))
        .map(str::to_owned)
        .collect())
}

/// Delete `name` if it exists.
pub(super) fn delete_ref(git: &Git, name: &str) -> Result<(), CheckoutError> {
    check_ref_name(git, name)?;
    git.run(&["update-ref", "-d", name])?;
    Ok(())
}
