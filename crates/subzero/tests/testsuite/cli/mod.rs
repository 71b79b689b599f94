//! The command line beside `subzero mcp`: `doctor`, `inspect`, the `mcp` flags, `--quiet`, the
//! read-only commands, isolated checkouts (`gc`, and how `doctor`, `ls`, `watch` show them).

mod checkouts;
mod doctor;
mod inspect;
mod mcp_flags;
mod quiet;
mod readonly;
mod version;
mod wait;
