//! The real hosts (Codex, Claude Code, OpenCode, Pi) driving `subzero mcp` end to end.

mod claude_code;
mod claude_code_cost;
mod claude_code_tasks;
mod codex;
pub(crate) mod opencode;
mod pi;
