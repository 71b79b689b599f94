//! Drawing a schedule from a seed: the generator keeps what it has drawn so far (the
//! slots spawned, their templates and home brokers, the calls that carry a `requestId`), so
//! later calls name children and retries that exist.

use super::{Action, Cursor, Fault, Invalid, Landing, Op, Schedule, Shape, Step};
use crate::plan::{Bash, Ending, Plan, Turn};
use crate::rng::Rng;

/// The schedule `seed` names for `shape`.
pub(super) fn schedule(seed: u64, shape: Shape) -> Schedule {
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

struct Generator {
    rng: Rng,
    seed: u64,
    /// What each slot's spawn asked for, and the broker it went to.
    slots: Vec<Slot>,
    /// Steps whose call carries a `requestId`.
    requests: Vec<usize>,
    /// The next step's index over the whole schedule.
    index: usize,
    brokers: usize,
}

/// One spawned slot as the generator remembers it.
#[derive(Clone, Copy)]
struct Slot {
    coder: bool,
    isolated: bool,
    home: usize,
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
    Apply,
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
                            self.slots[*slot].home = any;
                            any
                        }
                        (_, Some(slot)) if self.rng.chance(75) => slot.home,
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
        let kind = self.kind();
        match kind {
            Kind::Spawn => self.spawn(epoch),
            Kind::Followup | Kind::Resume => self.run_op(kind, epoch),
            _ => self.other_op(kind),
        }
    }

    /// Which kind of call comes next (the first is a spawn).
    fn kind(&mut self) -> Kind {
        if self.slots.is_empty() {
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
                (if self.isolated_slots() > 0 { 8 } else { 0 }, Kind::Apply),
                (9, Kind::Invalid),
                (if self.requests.is_empty() { 0 } else { 6 }, Kind::Retry),
            ])
        }
    }

    fn spawn(&mut self, epoch: usize) -> Op {
        let coder = self.rng.chance(45);
        let isolated = coder && self.rng.chance(45);
        let slot = self.slots.len();
        self.slots.push(Slot {
            coder,
            isolated,
            home: 0,
        });
        Op::Spawn {
            slot,
            coder,
            isolated,
            plan: self.plan(epoch, self.slots[slot]),
            request: self.request("sp"),
            budget: self.rng.chance(50),
        }
    }

    /// A call that starts a run (a follow-up, a resume with a message).
    fn run_op(&mut self, kind: Kind, epoch: usize) -> Op {
        match kind {
            Kind::Followup => {
                let slot = self.slot();
                let drawn = self.drawn(slot);
                Op::Followup {
                    slot,
                    plan: self.plan(epoch, drawn),
                    request: self.request("fu"),
                    compact: self.rng.chance(10),
                }
            }
            _ => {
                let slot = self.slot();
                let drawn = self.drawn(slot);
                let plan = self.rng.chance(50).then(|| self.plan(epoch, drawn));
                Op::Resume {
                    slot,
                    plan,
                    request: self.request("re"),
                }
            }
        }
    }

    /// A call that starts no run.
    fn other_op(&mut self, kind: Kind) -> Op {
        match kind {
            Kind::Steer => Op::Steer { slot: self.slot() },
            Kind::Stop => Op::Stop {
                slot: self.slot(),
                stale: self.rng.chance(20),
                wait_ms: self.rng.range(0, 3000),
            },
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
            Kind::Apply => Op::Apply {
                slot: self.isolated_slot(),
                how: self.rng.weighted(&[
                    (45, Landing::Edits),
                    (30, Landing::Commit),
                    (25, Landing::Discard),
                ]),
                race: self.rng.chance(30),
            },
            Kind::Invalid => {
                Op::Invalid(Invalid::ALL[self.rng.below(Invalid::ALL.len() as u64) as usize])
            }
            Kind::Retry => Op::Retry {
                of: self.requests[self.rng.below(self.requests.len() as u64) as usize],
            },
            Kind::Spawn | Kind::Followup | Kind::Resume => Op::Info,
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

    /// What the slot's spawn drew (a researcher's for no slot).
    fn drawn(&self, slot: Option<usize>) -> Slot {
        slot.map_or(
            Slot {
                coder: false,
                isolated: false,
                home: 0,
            },
            |s| self.slots[s],
        )
    }

    fn isolated_slots(&self) -> usize {
        self.slots.iter().filter(|s| s.isolated).count()
    }

    /// Mostly an isolated slot (the ones with a change to apply); now and then any slot,
    /// whose shared child's apply is refused.
    fn isolated_slot(&mut self) -> Option<usize> {
        let isolated: Vec<usize> = (0..self.slots.len())
            .filter(|s| self.slots[*s].isolated)
            .collect();
        if isolated.is_empty() || self.rng.chance(12) {
            return self.slot();
        }
        Some(isolated[self.rng.below(isolated.len() as u64) as usize])
    }

    fn request(&mut self, kind: &str) -> Option<String> {
        self.rng
            .chance(50)
            .then(|| format!("{kind}-{}-{}", self.seed, self.index))
    }

    fn plan(&mut self, epoch: usize, slot: Slot) -> Plan {
        let tag = format!("s{}e{epoch}n{}", self.seed, self.index);
        let count = self.rng.weighted(&[(25, 0), (35, 1), (25, 2), (15, 3)]);
        let turns = (0..count).map(|_| self.turn(slot)).collect();
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

    fn turn(&mut self, slot: Slot) -> Turn {
        if slot.isolated && self.rng.chance(80) {
            // An isolated coder mostly writes, so most of its runs leave a change to apply.
            Turn::Bash(self.rng.weighted(&[
                (2, Bash::Quick),
                (2, Bash::Tree),
                (3, Bash::Write),
                (6, Bash::Note),
                (1, Bash::Hold),
                (1, Bash::Slow),
            ]))
        } else if slot.coder && self.rng.chance(75) {
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
    use super::super::*;

    #[test]
    #[ignore = "prints which seeds draw how many brokers (for choosing fixed seeds)"]
    fn brokers_by_seed() {
        for seed in 0..40 {
            let s = Schedule::generate(seed, Shape::default());
            eprintln!("seed {seed}: {} brokers, {} steps", s.brokers, s.len());
        }
    }

    #[test]
    #[ignore = "prints which seeds spawn isolated coders early and apply them after a checkpoint (for choosing the isolated fixed seed)"]
    fn isolated_work_by_seed() {
        let shape = Shape {
            epochs: 2,
            ..Shape::default()
        };
        for seed in 0..200 {
            let s = Schedule::generate(seed, shape);
            let isolated: Vec<usize> = s.epochs[0]
                .iter()
                .filter_map(|st| match &st.action {
                    Action::Call {
                        op:
                            Op::Spawn {
                                slot,
                                isolated: true,
                                ..
                            },
                        ..
                    } => Some(*slot),
                    _ => None,
                })
                .collect();
            let later_applies = s.epochs[1]
                .iter()
                .filter(|st| {
                    matches!(&st.action, Action::Call { op: Op::Apply { slot: Some(k), .. }, .. }
                        if isolated.contains(k))
                })
                .count();
            if later_applies >= 2 {
                eprintln!(
                    "seed {seed}: {} brokers, {} steps, {} isolated spawns in epoch 1, {later_applies} applies of them in epoch 2",
                    s.brokers,
                    s.len(),
                    isolated.len()
                );
            }
        }
    }

    #[test]
    fn only_coders_are_isolated_and_applies_follow_an_isolated_spawn() {
        for seed in 0..50 {
            let s = Schedule::generate(seed, Shape::default());
            let mut isolated_yet = false;
            for step in s.epochs.iter().flatten() {
                match &step.action {
                    Action::Call {
                        op:
                            Op::Spawn {
                                coder, isolated, ..
                            },
                        ..
                    } => {
                        assert!(coder | !isolated, "seed {seed}: an isolated researcher");
                        isolated_yet |= isolated;
                    }
                    Action::Call {
                        op: Op::Apply { .. },
                        ..
                    } => assert!(
                        isolated_yet,
                        "seed {seed}: an apply before any isolated spawn"
                    ),
                    _ => {}
                }
            }
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
