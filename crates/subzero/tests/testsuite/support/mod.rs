//! What the areas share: environments with a scripted model and a real broker, process-table
//! inspection and reapers, raw MCP clients, pseudo-terminals, real hosts and outside clients
//! and the prerequisites they need.

pub mod chat_hosts;
pub mod chat_request;
pub mod cli;
pub mod conformance;
pub mod containment;
pub mod control;
pub mod fake_mcp;
pub mod faults;
pub mod gate;
pub mod host_cost;
pub mod hosts;
pub mod live;
pub mod llama_cpp;
pub mod mcp;
pub mod prereq;
pub mod pty;
pub mod real_host;
pub mod scenario;
pub mod tmpfs;
pub mod worker;
