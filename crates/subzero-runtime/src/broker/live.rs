//! What a broker keeps in memory per child: the model key (never on disk) and the
//! handle of the child's worker while it has one.

use secrecy::SecretString;
use subzero_core::lifecycle::WorkerCapabilities;
use subzero_core::{ChildId, RunId};
use subzero_protocol as p;
use tokio::sync::mpsc;

/// The model a child runs against, with its key in memory only. `Debug` leaves the key out.
#[derive(Clone)]
pub(super) struct ModelKey {
    pub url: String,
    pub model: String,
    pub api: p::ModelApi,
    /// The caller's `outputTokensParam` (Chat Completions only), passed to the worker as is.
    pub output_tokens_param: Option<p::OutputTokensParam>,
    /// The model's context window in tokens: the caller's `contextWindow`, else
    /// `[limits] context_window`; `None` when neither names one.
    pub context_window: Option<u32>,
    pub credential_ref: String,
    pub key: SecretString,
}

impl std::fmt::Debug for ModelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelKey")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api", &self.api)
            .field("output_tokens_param", &self.output_tokens_param)
            .field("context_window", &self.context_window)
            .field("credential_ref", &self.credential_ref)
            .finish_non_exhaustive()
    }
}

/// A message for a child's worker driver.
#[derive(Debug)]
pub(super) enum ToWorker {
    /// A control message to write to the worker as is (boxed: a `start_run` is large,
    /// the steer and cancel that travel here are small).
    Control(Box<p::BrokerMessage>),
    /// Start this run once the worker is free (the driver builds `start_run`).
    Start { run: RunId, prompt: String },
}

/// The broker's handle on one child's live worker.
#[derive(Debug, Clone)]
pub(super) struct WorkerLink {
    pub tx: mpsc::UnboundedSender<ToWorker>,
    /// What the worker advertised in its `hello`.
    pub capabilities: WorkerCapabilities,
    /// The process-tree containment the worker reported in its `hello`.
    pub process: Option<p::ProcessContainment>,
}

/// In-memory state of one child this broker has touched.
#[derive(Debug)]
pub(super) struct Live {
    pub model: ModelKey,
    /// The child's frozen grant snapshot, as sent in `start_run`.
    pub snapshot: p::GrantSnapshot,
    pub worker: Option<WorkerLink>,
    /// Runs the parent asked to start with a compaction (`compact: true`), until their
    /// `start_run` is built.
    pub compact: std::collections::HashSet<RunId>,
    /// Where its runs work when not in the workspace: its isolated checkout.
    pub workdir: Option<std::path::PathBuf>,
    /// The next `start_run` is the first in a new checkout: it runs the template's setup.
    pub setup_pending: bool,
}

impl Live {
    pub fn new(model: ModelKey, snapshot: p::GrantSnapshot) -> Self {
        Live {
            model,
            snapshot,
            worker: None,
            compact: std::collections::HashSet::new(),
            workdir: None,
            setup_pending: false,
        }
    }
}

/// A child id with a human label for logs.
pub(super) fn label(child: ChildId) -> String {
    child.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_a_model_key_never_shows_the_key() {
        let model = ModelKey {
            url: "https://api.example.com/v1".into(),
            model: "m".into(),
            api: p::ModelApi::OpenaiCompletions,
            output_tokens_param: None,
            context_window: None,
            credential_ref: "example".into(),
            key: SecretString::from("sk-live-do-not-print"),
        };
        let shown = format!("{model:?} {model:#?}");
        assert!(!shown.contains("sk-live-do-not-print"), "{shown}");
        assert!(shown.contains("credential_ref"), "{shown}");
    }
}
