//! The workspace scopes a broker answers for: its own, and each one a caller named.

use std::path::Path;
use std::sync::Mutex;

use super::{BrokerError, lock};
use crate::scope::WorkspaceScope;

/// The broker's own scope and those callers named since it started.
#[derive(Debug)]
pub(super) struct Scopes {
    /// The default workspace scope (the host's project directory).
    pub(super) own: WorkspaceScope,
    others: Mutex<Vec<WorkspaceScope>>,
}

impl Scopes {
    pub(super) fn new(own: WorkspaceScope) -> Scopes {
        Scopes {
            own,
            others: Mutex::new(Vec::new()),
        }
    }

    /// The scope for a caller-named workspace root (or the default). Every scope a
    /// caller names is remembered, so ids from it resolve in later calls of this broker.
    pub(super) fn for_root(&self, root: Option<&str>) -> Result<WorkspaceScope, BrokerError> {
        let Some(root) = root else {
            return Ok(self.own.clone());
        };
        let scope = WorkspaceScope::resolve(Path::new(root)).map_err(|e| {
            BrokerError::invalid("workspaceRoot", BrokerError::from(e).message().to_owned())
        })?;
        if scope != self.own {
            let mut others = lock(&self.others);
            if !others.contains(&scope) {
                others.push(scope.clone());
            }
        }
        Ok(scope)
    }

    /// Every scope this broker answers for: its own first, then those callers named.
    pub(super) fn all(&self) -> Vec<WorkspaceScope> {
        let mut all = vec![self.own.clone()];
        all.extend(lock(&self.others).iter().cloned());
        all
    }
}
