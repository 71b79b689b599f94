//! The worker process on its own and the conformance suite of both workers: protocols, tools,
//! grants, containment, compaction, transcripts.

mod compaction;
mod conformance;
mod conformance_budgets;
mod conformance_hostile;
mod conformance_protocols;
mod conformance_recovery;
mod containment;
mod context;
mod grants;
mod lockfd;
mod mcp;
mod model;
mod protocol_anthropic;
mod protocol_chat;
mod protocol_responses;
mod redaction;
mod scratch;
mod tools;
mod transcript;
mod write_confinement;
