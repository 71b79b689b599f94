//! What a child's model does in one run, drawn from the seed and carried in the prompt.
//!
//! Children of several brokers call the model at once, in an order no seed controls. So
//! the schedule writes each run's model behaviour into the run's prompt as a directive
//! (`[soak tag=… turns=… end=…]`) and the model server ([`crate::model`]) answers every
//! request from the request alone: the latest directive in the conversation is the plan,
//! the assistant turns after it say how far along it is. The same schedule then meets the
//! same model, however its calls interleave.

use std::fmt;

/// One tool call the model makes before it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    Read,
    Grep,
    Ls,
    Find,
    /// `bash` (coders only).
    Bash(Bash),
}

/// What a `bash` call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bash {
    /// Prints and lists: done at once.
    Quick,
    /// Starts a tree that outlives the call: a background `sleep`, a `setsid` escapee and a
    /// double-forked one, all carrying the run's tag in their environment.
    Tree,
    /// Appends a line naming the call (`<tag>:<turn>`) to `soak-writes.txt`, a file every
    /// writer shares (a write; an isolated coder's lands in its checkout).
    Write,
    /// Appends a line naming the call to `soak-notes/<tag>.txt`, a file of this run alone
    /// (so an isolated coder's change applies cleanly unless another change is in its way).
    Note,
    /// Sleeps past the run's tool timeout: the call is killed and answered as timed out.
    Hold,
    /// Sleeps a second and a half, then prints.
    Slow,
}

/// How the run's last model request ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// A text answer of this many bytes, streamed at once.
    Text { bytes: u32 },
    /// A text answer streamed over about `ms` milliseconds.
    Slow { bytes: u32, ms: u32 },
    /// An HTTP error status with a JSON body.
    Http(u16),
    /// Some text, then the connection is cut mid-body.
    Cut,
    /// No response headers ever (the idle timeout ends it).
    HangHeaders,
    /// Some text, then silence (the idle timeout ends it).
    HangStream,
    /// More bytes than `model_response_bytes` allows.
    Oversize,
}

/// One run's model behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Unique in the schedule: names the run in prompts, answers and tool environments.
    pub tag: String,
    pub turns: Vec<Turn>,
    pub ending: Ending,
    /// Milliseconds the model waits before each answer starts (tool calls included).
    pub pace_ms: u32,
}

const OPEN: &str = "[soak ";

impl Plan {
    /// The prompt that carries this plan.
    pub fn prompt(&self) -> String {
        format!(
            "Work on the soak task below, then answer.\n{self}\nEnd of task {}.",
            self.tag
        )
    }

    /// The plan written in `text`, if any (the last one when there are several).
    pub fn find_in(text: &str) -> Option<Plan> {
        let start = text.rfind(OPEN)? + OPEN.len();
        let end = start + text[start..].find(']')?;
        Plan::parse(&text[start..end])
    }

    fn parse(body: &str) -> Option<Plan> {
        let (mut tag, mut turns, mut ending, mut pace_ms) = (None, Vec::new(), None, 0);
        for field in body.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            match key {
                "tag" => tag = Some(value.to_owned()),
                "turns" => {
                    turns = value
                        .split(',')
                        .filter(|t| !t.is_empty() && *t != "-")
                        .map(parse_turn)
                        .collect::<Option<Vec<_>>>()?;
                }
                "end" => ending = Some(parse_ending(value)?),
                "pace" => pace_ms = value.parse().ok()?,
                _ => return None,
            }
        }
        Some(Plan {
            tag: tag?,
            turns,
            ending: ending?,
            pace_ms,
        })
    }

    /// The exact text a run of this plan answers with, when it ends in text.
    pub fn answer(&self) -> Option<String> {
        match self.ending {
            Ending::Text { bytes } | Ending::Slow { bytes, .. } => {
                Some(answer_text(&self.tag, bytes as usize))
            }
            _ => None,
        }
    }
}

/// `soak answer <tag>: ` padded with a recognisable pattern to `bytes` bytes.
pub fn answer_text(tag: &str, bytes: usize) -> String {
    let mut text = format!("soak answer {tag}: ");
    let pattern = b"abcdefghijklmnopqrstuvwxyz0123456789 ";
    let mut i = 0;
    while text.len() < bytes {
        text.push(pattern[i % pattern.len()] as char);
        i += 1;
    }
    text
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let turns: Vec<String> = self.turns.iter().map(turn_name).collect();
        let turns = if turns.is_empty() {
            "-".to_owned()
        } else {
            turns.join(",")
        };
        write!(
            f,
            "{OPEN}tag={} turns={turns} end={} pace={}]",
            self.tag,
            ending_name(self.ending),
            self.pace_ms
        )
    }
}

fn turn_name(turn: &Turn) -> String {
    match turn {
        Turn::Read => "read",
        Turn::Grep => "grep",
        Turn::Ls => "ls",
        Turn::Find => "find",
        Turn::Bash(Bash::Quick) => "bash-quick",
        Turn::Bash(Bash::Tree) => "bash-tree",
        Turn::Bash(Bash::Write) => "bash-write",
        Turn::Bash(Bash::Note) => "bash-note",
        Turn::Bash(Bash::Hold) => "bash-hold",
        Turn::Bash(Bash::Slow) => "bash-slow",
    }
    .to_owned()
}

fn parse_turn(name: &str) -> Option<Turn> {
    Some(match name {
        "read" => Turn::Read,
        "grep" => Turn::Grep,
        "ls" => Turn::Ls,
        "find" => Turn::Find,
        "bash-quick" => Turn::Bash(Bash::Quick),
        "bash-tree" => Turn::Bash(Bash::Tree),
        "bash-write" => Turn::Bash(Bash::Write),
        "bash-note" => Turn::Bash(Bash::Note),
        "bash-hold" => Turn::Bash(Bash::Hold),
        "bash-slow" => Turn::Bash(Bash::Slow),
        _ => return None,
    })
}

fn ending_name(ending: Ending) -> String {
    match ending {
        Ending::Text { bytes } => format!("text:{bytes}"),
        Ending::Slow { bytes, ms } => format!("slow:{bytes}:{ms}"),
        Ending::Http(status) => format!("http:{status}"),
        Ending::Cut => "cut".to_owned(),
        Ending::HangHeaders => "hang-headers".to_owned(),
        Ending::HangStream => "hang-stream".to_owned(),
        Ending::Oversize => "oversize".to_owned(),
    }
}

fn parse_ending(value: &str) -> Option<Ending> {
    let mut parts = value.split(':');
    let kind = parts.next()?;
    let mut number = || parts.next()?.parse::<u32>().ok();
    Some(match kind {
        "text" => Ending::Text { bytes: number()? },
        "slow" => Ending::Slow {
            bytes: number()?,
            ms: number()?,
        },
        "http" => Ending::Http(u16::try_from(number()?).ok()?),
        "cut" => Ending::Cut,
        "hang-headers" => Ending::HangHeaders,
        "hang-stream" => Ending::HangStream,
        "oversize" => Ending::Oversize,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_survives_its_prompt() {
        let plan = Plan {
            tag: "s1e2n3".into(),
            turns: vec![
                Turn::Read,
                Turn::Bash(Bash::Tree),
                Turn::Bash(Bash::Note),
                Turn::Bash(Bash::Hold),
            ],
            ending: Ending::Slow {
                bytes: 900,
                ms: 700,
            },
            pace_ms: 250,
        };
        let steer = "please also look at the tests [not a plan";
        let text = format!("{}\n{steer}", plan.prompt());
        assert_eq!(Plan::find_in(&text), Some(plan));
        let bare = Plan {
            tag: "t".into(),
            turns: vec![],
            ending: Ending::Http(503),
            pace_ms: 0,
        };
        assert_eq!(Plan::find_in(&bare.prompt()), Some(bare));
        assert_eq!(Plan::find_in("[soak tag=x end=bogus]"), None);
    }

    #[test]
    fn an_answer_has_its_length_and_names_its_run() {
        let text = answer_text("s9e1n4", 300);
        assert_eq!(text.len(), 300);
        assert!(text.starts_with("soak answer s9e1n4: abc"));
        assert_eq!(answer_text("t", 3), "soak answer t: ");
    }
}
