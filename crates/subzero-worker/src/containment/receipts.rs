//! `containment` of the hello: what the kernel gives this worker's tool processes, one
//! member per kind (`info.schema.json` `ContainmentSupport`), built as the contract's types.

use std::fmt;

use subzero_protocol as p;

use super::{ProcessReport, fds, landlock, network, tool, view};
use crate::control::short_text;

/// A value the contract refuses: which field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(String);

impl Refused {
    /// `field` is refused for `why`.
    pub fn new(field: &str, why: impl fmt::Display) -> Self {
        Refused(format!("{field}: {why}"))
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// `text` as the wire type `T`, or why the contract refuses it at `field`.
pub fn wire<T>(text: impl Into<String>, field: &str) -> Result<T, Refused>
where
    T: TryFrom<String>,
    T::Error: fmt::Display,
{
    T::try_from(text.into()).map_err(|e| Refused::new(field, e))
}

/// What the kernel gives this worker's tool processes, probed at its start.
pub fn support(
    process: &ProcessReport,
    holders: fds::LockHolders,
) -> Result<p::ContainmentSupport, Refused> {
    let landlock = landlock::support();
    let hiding = view::hiding();
    let paths = hiding
        .paths
        .iter()
        .map(|h| wire(h.path().display().to_string(), "view.paths"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(p::ContainmentSupport {
        process: Some(p::ProcessContainment {
            mode: process.mode,
            reason: process
                .reason
                .as_deref()
                .map(|r| wire(short_text(r), "process.reason"))
                .transpose()?,
        }),
        filesystem: Some(p::FilesystemSupport {
            landlock_abi: landlock
                .abi()
                .and_then(|abi| std::num::NonZeroU64::new(u64::from(abi))),
            summary: wire(short_text(&landlock.summary()), "filesystem.summary")?,
        }),
        network: Some(network::support().receipt()?),
        ownership: Some(p::OwnershipReceipt {
            tools_hold_locks: holders.tools_hold_locks(),
            summary: wire(holders.summary(), "ownership.summary")?,
        }),
        view: Some(p::ViewReceipt {
            hidden: hiding.in_force(),
            summary: wire(short_text(&hiding.summary()), "view.summary")?,
            paths: Some(p::ViewReceiptPaths(paths)),
        }),
        resources: Some(tool::situation().mechanisms(None).receipt()?),
        worker: None,
    })
}
