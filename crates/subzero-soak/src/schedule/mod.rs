//! A soak's schedule: epochs of calls and faults, all drawn from one seed.
//!
//! The schedule is data, generated before anything runs, so a seed names it exactly and a
//! prefix of it (the first `n` steps) is a smaller schedule of the same soak: shrinking
//! bisects over that `n`. Calls name children by the *slot* of the spawn that made them
//! (the k-th spawn of the schedule), resolved when the call runs; a slot whose spawn was
//! never answered resolves to a well-formed id nobody has, which the broker must refuse
//! with `not_found`.

mod generate;

use crate::plan::Plan;

/// The whole soak of one seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub seed: u64,
    /// Brokers sharing the workspace and state directory (1–3).
    pub brokers: usize,
    pub epochs: Vec<Vec<Step>>,
}

/// One step: wait `after_ms`, then act (a call starts and runs on; a fault is injected).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub after_ms: u64,
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Call { broker: usize, op: Op },
    Fault(Fault),
}

/// A fault. `pick` chooses among the live workers at the moment it strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL a broker; a new one starts in its place after `down_ms`.
    KillBroker { broker: usize, down_ms: u64 },
    /// SIGKILL one worker.
    KillWorker { pick: u64 },
    /// SIGKILL a broker and every worker at the same moment.
    KillBoth { broker: usize, down_ms: u64 },
    /// SIGSTOP one worker, SIGCONT it `ms` later.
    PauseWorker { pick: u64, ms: u64 },
    /// Fill the state directory's file system to its last byte for `ms`.
    FullDisk { ms: u64 },
    /// A stranger holds the database's write lock for `ms`.
    LockDb { ms: u64 },
    /// The model server drops every connection for `ms`.
    DropModel { ms: u64 },
}

impl Fault {
    /// The name the report counts it under.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::KillBroker { .. } => "sigkill-broker",
            Fault::KillWorker { .. } => "sigkill-worker",
            Fault::KillBoth { .. } => "sigkill-broker-and-workers",
            Fault::PauseWorker { .. } => "sigstop-worker",
            Fault::FullDisk { .. } => "full-disk",
            Fault::LockDb { .. } => "database-locked",
            Fault::DropModel { .. } => "model-drops-connections",
        }
    }
}

/// One MCP call, with the child named by slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Spawn {
        slot: usize,
        coder: bool,
        /// A coder with its own checkout (`isolation: "checkout"`).
        isolated: bool,
        plan: Plan,
        request: Option<String>,
        budget: bool,
    },
    Followup {
        slot: Option<usize>,
        plan: Plan,
        request: Option<String>,
        compact: bool,
    },
    Steer {
        slot: Option<usize>,
    },
    Stop {
        slot: Option<usize>,
        /// Name a run that is not the active one (a finished run of the child, or none).
        stale: bool,
        wait_ms: u64,
    },
    Resume {
        slot: Option<usize>,
        plan: Option<Plan>,
        request: Option<String>,
    },
    Get {
        slot: Option<usize>,
        wait_ms: u64,
        cursor: Cursor,
        wait_for_event: bool,
    },
    List {
        limit: u64,
    },
    Output {
        slot: Option<usize>,
        offset: u64,
        length: u64,
    },
    Info,
    /// `subzero_apply` of the slot's child (meant for an isolated one; a shared child's is
    /// refused). With `race`, the same call goes to two brokers at once (to one broker
    /// twice when there is one).
    Apply {
        slot: Option<usize>,
        how: Landing,
        race: bool,
    },
    Invalid(Invalid),
    /// The call of step `of` (an earlier step, counted over the whole schedule), sent again
    /// with the same `requestId` and the same arguments.
    Retry {
        of: usize,
    },
}

impl Op {
    pub fn tool(&self) -> &'static str {
        match self {
            Op::Spawn { .. } => "subzero_spawn",
            Op::Followup { .. } | Op::Steer { .. } => "subzero_send",
            Op::Stop { .. } => "subzero_stop",
            Op::Resume { .. } => "subzero_resume",
            Op::Get { .. } => "subzero_get",
            Op::List { .. } => "subzero_list",
            Op::Output { .. } => "subzero_output",
            Op::Info => "subzero_info",
            Op::Apply { .. } => "subzero_apply",
            Op::Invalid(invalid) => invalid.tool(),
            Op::Retry { .. } => "retry",
        }
    }

    /// The slot a call names, if any.
    pub fn slot(&self) -> Option<usize> {
        match self {
            Op::Spawn { slot, .. } => Some(*slot),
            Op::Followup { slot, .. }
            | Op::Steer { slot }
            | Op::Stop { slot, .. }
            | Op::Resume { slot, .. }
            | Op::Get { slot, .. }
            | Op::Output { slot, .. }
            | Op::Apply { slot, .. } => *slot,
            _ => None,
        }
    }

    pub(crate) fn request_id(&self) -> Option<&str> {
        match self {
            Op::Spawn { request, .. }
            | Op::Followup { request, .. }
            | Op::Resume { request, .. } => request.as_deref(),
            _ => None,
        }
    }
}

/// What a `subzero_apply` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// Land the change as uncommitted edits.
    Edits,
    /// Land it as one commit with a message naming the step.
    Commit,
    /// Throw it away (`discard: true`).
    Discard,
}

/// Where a `get` reads events from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// The cursor the last answer for this child gave.
    Next,
    Zero,
    /// Far past the last event.
    Beyond,
}

/// A call the broker must refuse with a typed error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    UnknownTemplate,
    EmptyPrompt,
    OversizePrompt,
    UnknownCredential,
    BadModelUrl,
    NullBudget,
    BudgetPastMaximum,
    BadRequestId,
    UnknownChild,
    MalformedChildId,
    WaitPastMaximum,
    BadSendMode,
    UnknownArtifact,
    OutputPastMaximum,
    ListUnknownWorkspace,
    MissingArguments,
}

impl Invalid {
    pub(crate) const ALL: [Invalid; 16] = [
        Invalid::UnknownTemplate,
        Invalid::EmptyPrompt,
        Invalid::OversizePrompt,
        Invalid::UnknownCredential,
        Invalid::BadModelUrl,
        Invalid::NullBudget,
        Invalid::BudgetPastMaximum,
        Invalid::BadRequestId,
        Invalid::UnknownChild,
        Invalid::MalformedChildId,
        Invalid::WaitPastMaximum,
        Invalid::BadSendMode,
        Invalid::UnknownArtifact,
        Invalid::OutputPastMaximum,
        Invalid::ListUnknownWorkspace,
        Invalid::MissingArguments,
    ];

    pub fn tool(&self) -> &'static str {
        match self {
            Invalid::UnknownTemplate
            | Invalid::EmptyPrompt
            | Invalid::OversizePrompt
            | Invalid::UnknownCredential
            | Invalid::BadModelUrl
            | Invalid::NullBudget
            | Invalid::BudgetPastMaximum
            | Invalid::BadRequestId
            | Invalid::MissingArguments => "subzero_spawn",
            Invalid::UnknownChild | Invalid::MalformedChildId | Invalid::WaitPastMaximum => {
                "subzero_get"
            }
            Invalid::BadSendMode => "subzero_send",
            Invalid::UnknownArtifact | Invalid::OutputPastMaximum => "subzero_output",
            Invalid::ListUnknownWorkspace => "subzero_list",
        }
    }
}

/// The shape of the schedules a run draws.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub epochs: usize,
    /// Brokers, or `None` to draw 1–3 from the seed.
    pub brokers: Option<usize>,
    /// Steps per epoch (the fault among them), inclusive bounds.
    pub steps: (u64, u64),
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            epochs: 8,
            brokers: None,
            steps: (12, 28),
        }
    }
}

impl Schedule {
    /// The schedule `seed` names for this shape.
    pub fn generate(seed: u64, shape: Shape) -> Schedule {
        generate::schedule(seed, shape)
    }

    /// Steps over all epochs.
    pub fn len(&self) -> usize {
        self.epochs.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` steps of this schedule, as a schedule (epochs cut where `n` ends).
    pub fn prefix(&self, n: usize) -> Schedule {
        let mut left = n;
        let mut epochs = Vec::new();
        for epoch in &self.epochs {
            if left == 0 {
                break;
            }
            let take = left.min(epoch.len());
            epochs.push(epoch[..take].to_vec());
            left -= take;
        }
        Schedule {
            seed: self.seed,
            brokers: self.brokers,
            epochs,
        }
    }

    /// The step at `index` (counted over the whole schedule).
    pub fn step(&self, index: usize) -> Option<&Step> {
        self.epochs.iter().flatten().nth(index)
    }
}
