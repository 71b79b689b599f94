//! Creating a child's checkout: a shared clone of the workspace's repository, its base
//! checked out detached, submodules, included files and shared directories.

use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::error::CheckoutError;
use super::exclude;
use super::git::Git;
use super::include::copy_included;
use super::oid::Oid;
use super::probe::{RepoInfo, probe};
use super::refs::{check_ref_name, delete_ref, set_ref};
use super::remove::remove_tree;
use super::shared::link_shared;
use super::snapshot::{TempIndex, broker_commit, tree_of, tree_of_working_tree};
use super::submodules::init_submodules;

/// Where a checkout starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// The workspace's HEAD plus its uncommitted changes (tracked edits and untracked,
    /// non-ignored files), snapshotted without touching the workspace's index or files.
    WorkingTree,
    /// A named revision (branch, tag, commit id), with nothing carried.
    Revision(String),
}

/// What to prepare.
#[derive(Debug, Clone)]
pub struct PrepareRequest<'a> {
    /// The workspace (anywhere inside its working tree).
    pub workspace: &'a Path,
    /// The checkout directory to create (it may exist if empty), e.g.
    /// `<state>/checkouts/<scope>/<child-id>`.
    pub checkout: &'a Path,
    /// Where the checkout starts.
    pub base: Base,
    /// The ref that keeps the base alive in the workspace's repository, e.g.
    /// `refs/subzero/base/<child-id>`. Always set, also when the base is HEAD.
    pub base_ref: &'a str,
    /// Include patterns besides the workspace's `.worktreeinclude`.
    pub include: &'a [String],
    /// Ignored directories to share by symlink (`node_modules`, `.venv`, `web/node_modules`).
    pub shared: &'a [String],
}

/// A prepared checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The workspace's HEAD when the checkout was prepared.
    pub head: Oid,
    /// The commit the checkout starts from (kept alive by the base ref).
    pub base: Oid,
    /// The workspace had uncommitted changes (including untracked, non-ignored files).
    pub dirty: bool,
    /// Those changes are part of the base.
    pub carried: bool,
    /// Paths (relative) the broker placed in the checkout: included copies and shared
    /// links. Never part of a recorded change; pass them to [`super::record`].
    pub own_paths: Vec<PathBuf>,
}

/// Create the checkout. On failure nothing is left behind: the directory and the base ref
/// are removed again, and the workspace is untouched.
pub fn prepare(req: &PrepareRequest<'_>) -> Result<Prepared, CheckoutError> {
    let info = probe(req.workspace)?;
    let git = Git::at(&info.workdir);
    check_ref_name(&git, req.base_ref)?;
    claim_dir(req.checkout)?;
    let (base, dirty, carried) = resolve_base(&info, &req.base)?;
    set_ref(&git, req.base_ref, &base)?;
    match populate(&info, req, &base) {
        Ok(own_paths) => Ok(Prepared {
            head: info.head,
            base,
            dirty,
            carried,
            own_paths,
        }),
        Err(e) => {
            let _ = remove_tree(req.checkout);
            let _ = delete_ref(&git, req.base_ref);
            Err(e)
        }
    }
}

/// Refuse a directory that already has something in it.
fn claim_dir(dir: &Path) -> Result<(), CheckoutError> {
    match fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(CheckoutError::CheckoutExists {
                path: dir.to_path_buf(),
            }),
        },
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CheckoutError::io(format!("reading {}", dir.display()), e)),
    }
}

/// The base commit, whether the workspace was dirty, and whether that was carried.
fn resolve_base(info: &RepoInfo, base: &Base) -> Result<(Oid, bool, bool), CheckoutError> {
    let git = Git::at(&info.workdir);
    match base {
        Base::WorkingTree => {
            let index = TempIndex::seeded_from(&real_index(&git)?)?;
            let tree = tree_of_working_tree(&index.apply_to(git.clone()), &info.head)?;
            if tree == tree_of(&git, &info.head)? {
                return Ok((info.head.clone(), false, false));
            }
            let message = "subzero: base with the workspace's uncommitted changes";
            Ok((broker_commit(&git, &tree, &info.head, message)?, true, true))
        }
        Base::Revision(rev) => {
            let commit = resolve_revision(&git, rev, &info.workdir)?;
            let status = git.run(&["status", "--porcelain", "-z"])?;
            Ok((commit, !status.is_empty(), false))
        }
    }
}

/// The workspace's own index file (per worktree), only ever read.
fn real_index(git: &Git) -> Result<PathBuf, CheckoutError> {
    let out = git.run(&["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
    let line = out.strip_suffix(b"\n").unwrap_or(&out);
    Ok(super::oid::path_from_bytes(line))
}

fn resolve_revision(git: &Git, rev: &str, workdir: &Path) -> Result<Oid, CheckoutError> {
    let spec = format!("{rev}^{{commit}}");
    let args = [
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        &spec,
    ];
    let out = git.run_allowing(&args, 1)?;
    match out.code {
        Some(0) if !rev.is_empty() => Oid::parse(&out.stdout, "rev-parse"),
        _ => Err(CheckoutError::BadRevision {
            rev: rev.to_owned(),
            path: workdir.to_path_buf(),
        }),
    }
}

/// Clone, check out, and place the broker's own files; the paths placed.
fn populate(
    info: &RepoInfo,
    req: &PrepareRequest<'_>,
    base: &Oid,
) -> Result<Vec<PathBuf>, CheckoutError> {
    clone_at(info, req.checkout, base)?;
    init_submodules(&info.workdir, req.checkout)?;
    let mut own = copy_included(&info.workdir, req.checkout, req.include)?;
    own.extend(link_shared(&info.workdir, req.checkout, req.shared)?);
    exclude::append_to_checkout(req.checkout, &own)?;
    Ok(own)
}

/// `git clone --shared --no-checkout`, then the base checked out detached. The clone's
/// objects come from the workspace's repository through alternates; its `.git` is its own.
fn clone_at(info: &RepoInfo, checkout: &Path, base: &Oid) -> Result<(), CheckoutError> {
    let parent = checkout.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(parent)
        .map_err(|e| CheckoutError::io(format!("creating {}", parent.display()), e))?;
    let args: [&OsStr; 7] = [
        "clone".as_ref(),
        "--shared".as_ref(),
        "--no-checkout".as_ref(),
        "--quiet".as_ref(),
        "--template=".as_ref(),
        info.git_dir.as_os_str(),
        checkout.as_os_str(),
    ];
    // No reflogs for what the broker does (the child's own commits get them), and the
    // index git's `feature.manyFiles` picks (version 4: paths prefix-compressed, a sixth
    // smaller; git keeps the version when the child's git rewrites it): a checkout adds
    // little disk beyond its files.
    Git::at(parent)
        .config("core.logAllRefUpdates=false")
        .run(&args)?;
    Git::at(checkout)
        .config("core.logAllRefUpdates=false")
        .config("index.version=4")
        .config("core.hooksPath=/dev/null")
        .config("advice.detachedHead=false")
        // Writing files is what a large checkout waits on; parallel workers overlap it.
        .config("checkout.workers=0")
        .run(&["checkout", "--quiet", "--detach", base.as_str()])?;
    Ok(())
}
