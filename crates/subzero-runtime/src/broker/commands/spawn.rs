//! `subzero_spawn`: a new child on a template, its first run started.

use std::sync::Arc;

use subzero_core::template::{GrantSnapshot, Isolation};
use subzero_core::{ChildId, RunId};
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::admit::{model_row, wire_grant};
use crate::broker::engines::Asked;
use crate::broker::live::{Live, ModelKey};
use crate::broker::receipts::{Receipt, replayed};
use crate::broker::worker::{FirstRun, StartFrom};
use crate::broker::{Broker, BrokerError};
use crate::locks::ChildLock;
use crate::store::{Admit, AdmitSpawn, NewChild};

/// `subzero_spawn`.
impl Command for p::SpawnInput {
    const TOOL: &'static str = "subzero_spawn";
    type Output = p::SpawnOutput;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::SpawnOutput, BrokerError> {
        let input = self;
        broker.gate.check_open()?;
        let prompt = input.prompt.to_string();
        broker.policy.limits.check_prompt(&prompt)?;
        let scope = broker
            .scopes
            .for_root(input.workspace_root.as_deref().map(String::as_str))?;
        let request_id = input.request_id.as_deref().map(String::as_str);
        let receipt = Receipt::prepare("subzero_spawn", request_id, &input)?;
        if let Some(replayed) = broker.replay(&scope, receipt.as_ref()).await? {
            return Ok(replayed);
        }
        let snapshot = broker.spawn_grant(&input)?;
        let model = broker.policy.credential(&input.model)?;
        runnable(broker, &snapshot, &model).await?;
        let child = ChildId::generate();
        let run = RunId::generate();
        let write_capable = snapshot.write_capable();
        let isolated = isolated(broker, &input)?;
        // An isolated child writes only its checkout: it takes no writer slot of the
        // workspace (its worker slot still counts).
        let slots = broker.take_slots(&scope, write_capable && !isolated)?;
        let child_lock = ChildLock::try_acquire(&broker.paths, child)?;
        let snapshot_json = serde_json::to_value(&snapshot)
            .map_err(|e| BrokerError::internal(format!("cannot encode the grant snapshot: {e}")))?;
        let sent_snapshot = wire_grant(&snapshot)?;
        // Refuse before any state changes when an MCP server's environment is missing.
        crate::broker::worker::mcp_env(&sent_snapshot, &broker.policy.secrets)?;
        let checkout = match isolated {
            true => Some(broker.prepare_checkout(&scope, child, base(&input)).await?),
            false => None,
        };
        let output = p::SpawnOutput {
            checkout: checkout.as_ref().map(|c| c.view()).transpose()?,
            child_id: child.into(),
            run_id: run.into(),
            run: None,
        };
        let child_row = NewChild {
            label: label_of(&input, &broker.policy.secrets),
            child_id: child,
            scope: scope.clone(),
            template_id: snapshot.template_id().as_str().to_owned(),
            snapshot: snapshot_json.clone(),
            write_capable,
            model: model_row(&model),
        };
        let admission = AdmitSpawn {
            child: child_row,
            run_id: run,
            prompt: prompt.clone(),
            owner_token: broker.owner_token().to_owned(),
            receipt: receipt.map(|r| r.with_output(&output)).transpose()?,
        };
        let admitted = match checkout {
            None => broker.store.admit_spawn(admission).await?,
            Some(made) => {
                broker
                    .admit_isolated(&scope, child, admission, made)
                    .await?
            }
        };
        if let Admit::Replayed(stored) = admitted {
            return replayed("subzero_spawn", stored);
        }
        let live = Live::new(model, sent_snapshot);
        broker.workers.live().insert(child, live);
        let from = StartFrom::default();
        let first = FirstRun { run, prompt, from };
        broker
            .start_worker(child, &scope, child_lock, slots, first)
            .await?;
        Ok(output)
    }
}

/// The most characters of a label.
const LABEL_CHARS: usize = 64;

/// What the child is called: the spawn's label, else its prompt's first line that has
/// any text, else its template; secrets redacted, control characters turned to spaces,
/// cut to [`LABEL_CHARS`] characters.
fn label_of(input: &p::SpawnInput, secrets: &crate::secret_env::SecretEnv) -> String {
    let given = input.label.as_deref().map(String::as_str);
    let line = given
        .or_else(|| input.prompt.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or(input.template_id.as_str());
    let shown: String = secrets
        .redact(line)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cut: String = shown.trim().chars().take(LABEL_CHARS).collect();
    match cut.trim_end() {
        "" => input.template_id.to_string(),
        label => label.to_owned(),
    }
}

/// The revision an isolated spawn's checkout starts from, if it names one.
fn base(input: &p::SpawnInput) -> Option<String> {
    input.base_revision.as_deref().map(String::to_owned)
}

/// Whether the spawn asks for its own checkout (else its template's default), checked
/// against `baseRevision`, which only a checkout can use.
fn isolated(broker: &Broker, input: &p::SpawnInput) -> Result<bool, BrokerError> {
    let isolation = match input.isolation {
        Some(isolation) => Isolation::from(isolation),
        None => {
            broker
                .policy
                .templates
                .resolve(input.template_id.as_str())?
                .1
                .isolation
        }
    };
    if input.base_revision.is_some() && isolation != Isolation::Checkout {
        return Err(BrokerError::invalid(
            "baseRevision",
            "baseRevision is the revision an isolated checkout starts from; pass isolation: \"checkout\" with it, or leave it out",
        ));
    }
    Ok(isolation == Isolation::Checkout)
}

/// Whether a worker can run `snapshot`'s grant with `model` (its tools, MCP servers and
/// model protocol) and the kernel can hold its filesystem grant: refused before any state
/// changes.
async fn runnable(
    broker: &Broker,
    snapshot: &GrantSnapshot,
    model: &ModelKey,
) -> Result<(), BrokerError> {
    let asked = Asked {
        tools: snapshot.tools().to_vec(),
        mcp_servers: snapshot.mcp_servers().len(),
        compact: false,
        model,
    };
    broker.check_worker(snapshot.worker(), asked).await?;
    broker.check_filesystem(snapshot).await?;
    broker.check_network(&snapshot.network()).await
}
