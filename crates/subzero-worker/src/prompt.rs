//! What the model is shown: the system prompt (the snapshot's instructions and skills) and
//! the transcript's root→leaf path as a protocol-neutral conversation.

use crate::control::StartRun;
use crate::model::{Call, Conversation, Item};
use crate::transcript::{Entry, EntryType, Transcript};

/// Snapshot instructions plus explicit skills.
pub(crate) fn system_prompt(start: &StartRun) -> String {
    let mut system = start.snapshot.instructions.to_string();
    for skill in start.snapshot.skills.iter() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&format!(
            "## Skill: {}\n\n{}",
            skill.name.as_str(),
            skill.content.as_str()
        ));
    }
    system
}

/// The conversation for the model: the system prompt and the root→leaf path.
pub(crate) fn conversation(system: &str, transcript: &Transcript) -> Conversation {
    Conversation {
        system: system.to_owned(),
        items: items(transcript.path()),
    }
}

/// `entries` as the conversation's items (the header is none).
pub(crate) fn items<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Vec<Item> {
    let mut items = Vec::new();
    for entry in entries {
        let content = entry.content.clone().unwrap_or_default();
        match entry.kind {
            EntryType::Header => {}
            EntryType::Prompt
            | EntryType::Steer
            | EntryType::RecoveryNotice
            | EntryType::SetupNotice
            | EntryType::BudgetNotice
            | EntryType::Summary => {
                items.push(Item::User(content));
            }
            EntryType::Assistant => items.push(Item::Assistant {
                text: entry.content.clone(),
                calls: entry
                    .tool_calls
                    .iter()
                    .map(|c| Call {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
            }),
            EntryType::ToolResult => items.push(Item::ToolResult {
                call_id: entry.tool_call_id.clone().unwrap_or_default(),
                name: entry.name.clone().unwrap_or_default(),
                content,
                is_error: entry.is_error.unwrap_or(false),
            }),
        }
    }
    items
}
