//! A tool call as its deltas arrive, with the argument cap: written once for every
//! protocol. Past `max_tool_argument_bytes` a call's arguments are dropped (memory stays
//! flat) but still counted, so the call is answered with a short tool error naming its size.

use super::protocol::OnText;
use super::{ModelTurn, ToolCall};

/// The answer as the stream has told it so far: its turn (text, usage, finish reason) and
/// its calls. Every assembler keeps one.
#[derive(Debug)]
pub struct Draft {
    pub turn: ModelTurn,
    pub calls: Calls,
}

impl Draft {
    pub fn new(max_argument_bytes: u64) -> Self {
        Self {
            turn: ModelTurn::default(),
            calls: Calls::new(max_argument_bytes),
        }
    }

    /// Appends a piece of answer text and shows it to `on_text` (an empty piece is nothing).
    pub fn text(&mut self, text: &str, on_text: &mut OnText<'_>) {
        if !text.is_empty() {
            self.turn.text.push_str(text);
            on_text(text);
        }
    }

    /// The tokens the stream reported (replacing any earlier report).
    pub fn usage(&mut self, input: u64, output: u64) {
        self.turn.usage_reported = true;
        self.turn.input_tokens = input;
        self.turn.output_tokens = output;
    }

    pub fn text_len(&self) -> usize {
        self.turn.text.len()
    }

    /// The turn with its calls (see [`Calls::finish`] for `prefix`).
    pub fn finish(mut self, prefix: &str) -> ModelTurn {
        self.turn.tool_calls = self.calls.finish(prefix);
        self.turn
    }
}

/// One call being assembled.
#[derive(Debug, Default)]
pub struct PartialCall {
    /// The call's id as the provider sent it.
    pub id: Option<String>,
    /// The provider's own key for the call (Responses' item id): its id when it has no other.
    pub key: Option<String>,
    pub name: String,
    arguments: String,
    /// Bytes of arguments received, kept counting past the cap.
    argument_bytes: u64,
}

impl PartialCall {
    /// Keeps the first non-empty id.
    pub fn id_once(&mut self, id: Option<&str>) {
        if self.id.is_none() {
            self.id = id.filter(|id| !id.is_empty()).map(str::to_owned);
        }
    }

    /// Keeps the first non-empty name.
    pub fn name_once(&mut self, name: Option<&str>) {
        if self.name.is_empty()
            && let Some(name) = name
        {
            self.name = name.to_owned();
        }
    }

    /// A call has a name or arguments (a stray event for something else leaves neither).
    pub fn is_call(&self) -> bool {
        !self.name.is_empty() || self.argument_bytes > 0
    }

    /// Whether nothing but white space arrived as arguments (and the cap was not passed).
    pub fn has_no_arguments(&self, max: u64) -> bool {
        self.argument_bytes <= max && self.arguments.trim().is_empty()
    }

    /// Whether the arguments passed `max`.
    pub fn oversized(&self, max: u64) -> Option<u64> {
        (self.argument_bytes > max).then_some(self.argument_bytes)
    }
}

/// The calls of one answer, in the order they started.
#[derive(Debug)]
pub struct Calls {
    calls: Vec<PartialCall>,
    max_argument_bytes: u64,
}

impl Calls {
    pub fn new(max_argument_bytes: u64) -> Self {
        Self {
            calls: Vec::new(),
            max_argument_bytes,
        }
    }

    /// Starts a call; its slot.
    pub fn open(&mut self) -> usize {
        self.calls.push(PartialCall::default());
        self.calls.len() - 1
    }

    /// The newest call's slot.
    pub fn last(&self) -> Option<usize> {
        self.calls.len().checked_sub(1)
    }

    pub fn get(&self, slot: usize) -> Option<&PartialCall> {
        self.calls.get(slot)
    }

    pub fn get_mut(&mut self, slot: usize) -> Option<&mut PartialCall> {
        self.calls.get_mut(slot)
    }

    pub fn iter(&self) -> impl Iterator<Item = &PartialCall> {
        self.calls.iter()
    }

    /// Adds one piece of a call's arguments.
    pub fn append(&mut self, slot: usize, piece: &str) {
        let max = self.max_argument_bytes;
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        call.argument_bytes = call.argument_bytes.saturating_add(len(piece));
        if call.argument_bytes <= max {
            call.arguments.push_str(piece);
        } else {
            call.arguments = String::new();
        }
    }

    /// A call's whole arguments, replacing what its pieces assembled.
    pub fn replace(&mut self, slot: usize, whole: &str) {
        let max = self.max_argument_bytes;
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        call.argument_bytes = len(whole);
        call.arguments = if call.argument_bytes <= max {
            whole.to_owned()
        } else {
            String::new()
        };
    }

    pub fn max_argument_bytes(&self) -> u64 {
        self.max_argument_bytes
    }

    /// Whether any slot holds a call.
    pub fn any(&self) -> bool {
        self.calls.iter().any(PartialCall::is_call)
    }

    /// The calls, in order; slots that hold no call are left out. A call without an id (or
    /// key) is `<prefix>_<slot>`.
    pub fn finish(self, prefix: &str) -> Vec<ToolCall> {
        let max = self.max_argument_bytes;
        self.calls
            .into_iter()
            .enumerate()
            .filter(|(_, call)| call.is_call())
            .map(|(n, call)| {
                let oversized = call.oversized(max);
                ToolCall {
                    id: call
                        .id
                        .or(call.key)
                        .unwrap_or_else(|| format!("{prefix}_{n}")),
                    name: call.name,
                    arguments: if oversized.is_some() {
                        String::new()
                    } else {
                        call.arguments
                    },
                    oversized,
                }
            })
            .collect()
    }
}

fn len(text: &str) -> u64 {
    u64::try_from(text.len()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_over_the_cap_are_dropped_and_counted() {
        let mut calls = Calls::new(8);
        let slot = calls.open();
        calls.get_mut(slot).expect("slot").name_once(Some("read"));
        for piece in ["{\"path\"", ":\"aaaa", "aaaa\"}"] {
            calls.append(slot, piece);
        }
        let done = calls.finish("call");
        assert_eq!(done[0].arguments, "");
        assert_eq!(done[0].oversized, Some(19));
        assert_eq!(done[0].id, "call_0");
    }

    #[test]
    fn a_whole_replacement_is_capped_too_and_empty_slots_are_no_calls() {
        let mut calls = Calls::new(8);
        let stray = calls.open();
        let slot = calls.open();
        calls.replace(slot, "{\"path\":\"aaaaaaaa\"}");
        assert!(!calls.get(stray).expect("stray").is_call());
        let done = calls.finish("call");
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].oversized, Some(19));
        assert_eq!(done[0].id, "call_1");
    }
}
