//! The command line beside `subzero mcp`: `doctor`, `inspect`, the `mcp` flags, `--quiet`, the
//! read-only commands.

mod doctor;
mod inspect;
mod mcp_flags;
mod quiet;
mod readonly;
