//! `subzero watch` in a pseudo-terminal.

mod tui;
