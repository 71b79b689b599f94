//! The nine MCP tools, each a command: its input type (the contract's), its answer, and
//! one `execute` over the broker's services (the store, the worker registry, the policy,
//! the scopes, the receipts). The MCP server parses a call's arguments into the command's
//! input type and runs it; an embedder runs one with [`Broker::execute`].

mod apply;
pub(super) mod get;
pub(super) mod info;
mod list;
mod output;
pub(super) mod resume;
mod send;
mod spawn;
mod stop;

use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Broker, BrokerError};

pub use get::ProgressSink;

/// One tool call: parsed from the call's arguments, executed once.
pub trait Command: DeserializeOwned + subzero_protocol::Validate + Send + 'static {
    /// The tool's name (`subzero_spawn`).
    const TOOL: &'static str;
    /// What the call answers (its structured content).
    type Output: Serialize + Send;

    /// Runs the call on `broker`'s services.
    fn execute(
        self,
        broker: &Arc<Broker>,
        ctx: Context,
    ) -> impl Future<Output = Result<Self::Output, BrokerError>> + Send;
}

/// What a call brings besides its arguments.
#[derive(Debug, Default)]
pub struct Context {
    /// Where a waiting `subzero_get` reports progress lines, when the caller asked for
    /// them (MCP progress notifications).
    pub progress: Option<ProgressSink>,
}

impl Broker {
    /// Runs `command` on this broker.
    pub async fn execute<C: Command>(
        self: &Arc<Self>,
        command: C,
        ctx: Context,
    ) -> Result<C::Output, BrokerError> {
        command.execute(self, ctx).await
    }
}
