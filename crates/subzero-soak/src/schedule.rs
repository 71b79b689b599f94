//! A soak's schedule: epochs of calls and faults, all drawn from one seed.
//!
//! The schedule is data, generated before anything runs, so a seed names it exactly and a
//! prefix of it (the first `n` steps) is a smaller schedule of the same soak: shrinking
//! bisects over that `n`. Calls name children by the *slot* of the spawn that made them
//! (the k-th spawn of the schedule), resolved when the call runs; a slot whose spawn was
//! never answered resolves to a well-formed id nobody has, which the broker must refuse
//! with `not_found`.

use crate::plan::{Bash, Ending, Plan, Turn};
use crate::rng::Rng;

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
            | Op::Output { slot, .. } => *slot,
            _ => None,
        }
    }

    fn request_id(&self) -> Option<&str> {
        match self {
            Op::Spawn { request, .. }
            | Op::Followup { request, .. }
            | Op::Resume { request, .. } => request.as_deref(),
            _ => None,
        }
    }
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
    const ALL: [Invalid; 16] = [
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
        let mut g = Generator {
            rng: Rng::new(seed),
            seed,
            slots: Vec::new(),
            requests: Vec::new(),
            index: 0,
            brokers: 1,
        };
        g.brokers = shape
            .brokers
            .unwrap_or_else(|| g.rng.range(1, 3) as usize)
            .max(1);
        let epochs = (0..shape.epochs).map(|e| g.epoch(e, shape)).collect();
        Schedule {
            seed,
            brokers: g.brokers,
            epochs,
        }
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

struct Generator {
    rng: Rng,
    seed: u64,
    /// Whether each slot's child is a coder, and the broker its spawn went to.
    slots: Vec<(bool, usize)>,
    /// Steps whose call carries a `requestId`.
    requests: Vec<usize>,
    /// The next step's index over the whole schedule.
    index: usize,
    brokers: usize,
}

#[derive(Clone, Copy)]
enum Kind {
    Spawn,
    Followup,
    Steer,
    Stop,
    Resume,
    Get,
    List,
    Output,
    Info,
    Invalid,
    Retry,
}

impl Generator {
    fn epoch(&mut self, epoch: usize, shape: Shape) -> Vec<Step> {
        let n = self
            .rng
            .range(shape.steps.0, shape.steps.1.max(shape.steps.0)) as usize;
        let fault_at = self.rng.below(n as u64) as usize;
        (0..n)
            .map(|i| {
                let after_ms = self.rng.range(0, 200);
                let action = if i == fault_at {
                    Action::Fault(self.fault())
                } else {
                    let any = self.rng.below(self.brokers as u64) as usize;
                    let op = self.op(epoch);
                    // A parent mostly talks to the broker its child was spawned on (the
                    // one that holds its key); now and then to another one.
                    let broker = match (&op, op.slot().and_then(|s| self.slots.get(s))) {
                        (Op::Spawn { slot, .. }, _) => {
                            self.slots[*slot].1 = any;
                            any
                        }
                        (_, Some((_, home))) if self.rng.chance(75) => *home,
                        _ => any,
                    };
                    Action::Call { broker, op }
                };
                if let Action::Call { op, .. } = &action
                    && op.request_id().is_some()
                {
                    self.requests.push(self.index);
                }
                self.index += 1;
                Step { after_ms, action }
            })
            .collect()
    }

    fn fault(&mut self) -> Fault {
        let broker = self.rng.below(self.brokers as u64) as usize;
        let pick = self.rng.next_u64();
        let kind = self.rng.weighted(&[
            (20, 0u8),
            (14, 1),
            (14, 2),
            (14, 3),
            (12, 4),
            (12, 5),
            (14, 6),
        ]);
        match kind {
            0 => Fault::KillBroker {
                broker,
                down_ms: self.rng.range(100, 1500),
            },
            1 => Fault::KillWorker { pick },
            2 => Fault::KillBoth {
                broker,
                down_ms: self.rng.range(100, 1500),
            },
            3 => Fault::PauseWorker {
                pick,
                ms: self.rng.range(300, 4000),
            },
            4 => Fault::FullDisk {
                ms: self.rng.range(300, 3000),
            },
            5 => Fault::LockDb {
                ms: self.rng.range(300, 4000),
            },
            _ => Fault::DropModel {
                ms: self.rng.range(300, 3000),
            },
        }
    }

    fn op(&mut self, epoch: usize) -> Op {
        let kind = if self.slots.is_empty() {
            Kind::Spawn
        } else {
            self.rng.weighted(&[
                (if self.slots.len() < 8 { 18 } else { 6 }, Kind::Spawn),
                (14, Kind::Followup),
                (7, Kind::Steer),
                (8, Kind::Stop),
                (7, Kind::Resume),
                (18, Kind::Get),
                (4, Kind::List),
                (6, Kind::Output),
                (2, Kind::Info),
                (9, Kind::Invalid),
                (if self.requests.is_empty() { 0 } else { 6 }, Kind::Retry),
            ])
        };
        match kind {
            Kind::Spawn => {
                let coder = self.rng.chance(45);
                let slot = self.slots.len();
                self.slots.push((coder, 0));
                Op::Spawn {
                    slot,
                    coder,
                    plan: self.plan(epoch, coder),
                    request: self.request("sp"),
                    budget: self.rng.chance(50),
                }
            }
            Kind::Followup => {
                let slot = self.slot();
                let coder = slot.is_some_and(|s| self.slots[s].0);
                Op::Followup {
                    slot,
                    plan: self.plan(epoch, coder),
                    request: self.request("fu"),
                    compact: self.rng.chance(10),
                }
            }
            Kind::Steer => Op::Steer { slot: self.slot() },
            Kind::Stop => Op::Stop {
                slot: self.slot(),
                stale: self.rng.chance(20),
                wait_ms: self.rng.range(0, 3000),
            },
            Kind::Resume => {
                let slot = self.slot();
                let coder = slot.is_some_and(|s| self.slots[s].0);
                let plan = self.rng.chance(50).then(|| self.plan(epoch, coder));
                Op::Resume {
                    slot,
                    plan,
                    request: self.request("re"),
                }
            }
            Kind::Get => Op::Get {
                slot: self.slot(),
                wait_ms: self.rng.range(0, 3000),
                cursor: self.rng.weighted(&[
                    (70, Cursor::Next),
                    (20, Cursor::Zero),
                    (10, Cursor::Beyond),
                ]),
                wait_for_event: self.rng.chance(30),
            },
            Kind::List => Op::List {
                limit: self.rng.range(1, 60),
            },
            Kind::Output => {
                let inside = self.rng.range(1, 5000);
                Op::Output {
                    slot: self.slot(),
                    offset: self.rng.weighted(&[(70, 0), (30, inside)]),
                    length: self.rng.range(1, 65536),
                }
            }
            Kind::Info => Op::Info,
            Kind::Invalid => {
                Op::Invalid(Invalid::ALL[self.rng.below(Invalid::ALL.len() as u64) as usize])
            }
            Kind::Retry => Op::Retry {
                of: self.requests[self.rng.below(self.requests.len() as u64) as usize],
            },
        }
    }

    /// An existing slot (most calls name a child that exists), or none at all.
    fn slot(&mut self) -> Option<usize> {
        if self.slots.is_empty() || self.rng.chance(3) {
            None
        } else {
            Some(self.rng.below(self.slots.len() as u64) as usize)
        }
    }

    fn request(&mut self, kind: &str) -> Option<String> {
        self.rng
            .chance(50)
            .then(|| format!("{kind}-{}-{}", self.seed, self.index))
    }

    fn plan(&mut self, epoch: usize, coder: bool) -> Plan {
        let tag = format!("s{}e{epoch}n{}", self.seed, self.index);
        let count = self.rng.weighted(&[(25, 0), (35, 1), (25, 2), (15, 3)]);
        let turns = (0..count).map(|_| self.turn(coder)).collect();
        let ending = self.rng.weighted(&[
            (40, 0u8),
            (16, 1),
            (8, 2),
            (8, 3),
            (7, 4),
            (5, 5),
            (5, 6),
            (5, 7),
        ]);
        let ending = match ending {
            0 => Ending::Text {
                bytes: self.rng.range(40, 3000) as u32,
            },
            1 => Ending::Slow {
                bytes: self.rng.range(500, 6000) as u32,
                ms: self.rng.range(500, 4000) as u32,
            },
            2 => Ending::Text {
                bytes: self.rng.range(9000, 40000) as u32,
            },
            3 => Ending::Http(self.rng.weighted(&[(1, 429), (1, 500), (1, 503), (1, 400)])),
            4 => Ending::Cut,
            5 => Ending::HangHeaders,
            6 => Ending::HangStream,
            _ => Ending::Oversize,
        };
        let pace_ms = self.rng.weighted(&[(40, 0), (40, 300), (20, 900)]) as u32;
        Plan {
            tag,
            turns,
            ending,
            pace_ms,
        }
    }

    fn turn(&mut self, coder: bool) -> Turn {
        if coder && self.rng.chance(75) {
            Turn::Bash(self.rng.weighted(&[
                (3, Bash::Quick),
                (4, Bash::Tree),
                (3, Bash::Write),
                (1, Bash::Hold),
                (2, Bash::Slow),
            ]))
        } else {
            self.rng.weighted(&[
                (1, Turn::Read),
                (1, Turn::Grep),
                (1, Turn::Ls),
                (1, Turn::Find),
            ])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "prints which seeds draw how many brokers (for choosing fixed seeds)"]
    fn brokers_by_seed() {
        for seed in 0..40 {
            let s = Schedule::generate(seed, Shape::default());
            eprintln!("seed {seed}: {} brokers, {} steps", s.brokers, s.len());
        }
    }

    #[test]
    fn a_seed_names_one_schedule() {
        let a = Schedule::generate(42, Shape::default());
        assert_eq!(a, Schedule::generate(42, Shape::default()));
        assert_ne!(a, Schedule::generate(43, Shape::default()));
        assert!((1..=3).contains(&a.brokers));
        assert_eq!(a.epochs.len(), 8);
    }

    #[test]
    fn every_epoch_has_one_fault_and_the_first_call_spawns() {
        for seed in 0..50 {
            let s = Schedule::generate(seed, Shape::default());
            for epoch in &s.epochs {
                let faults = epoch
                    .iter()
                    .filter(|st| matches!(st.action, Action::Fault(_)))
                    .count();
                assert_eq!(faults, 1, "seed {seed}");
            }
            let first_call = s.epochs.iter().flatten().find_map(|st| match &st.action {
                Action::Call { op, .. } => Some(op.clone()),
                Action::Fault(_) => None,
            });
            assert!(
                matches!(first_call, Some(Op::Spawn { slot: 0, .. })),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn a_prefix_is_the_schedule_cut_short() {
        let s = Schedule::generate(7, Shape::default());
        let n = s.len() / 2 + 1;
        let p = s.prefix(n);
        assert_eq!(p.len(), n);
        for i in 0..n {
            assert_eq!(p.step(i), s.step(i));
        }
        assert_eq!(s.prefix(s.len() + 10), s);
        assert!(s.prefix(0).is_empty());
    }

    #[test]
    fn retries_name_earlier_calls_with_a_request_id() {
        for seed in 0..50 {
            let s = Schedule::generate(seed, Shape::default());
            for (i, step) in s.epochs.iter().flatten().enumerate() {
                if let Action::Call {
                    op: Op::Retry { of },
                    ..
                } = step.action
                {
                    assert!(of < i);
                    let Some(Step {
                        action: Action::Call { op, .. },
                        ..
                    }) = s.step(of)
                    else {
                        panic!("a retry names a call")
                    };
                    assert!(op.request_id().is_some());
                }
            }
        }
    }
}
