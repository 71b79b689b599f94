//! subzero-protocol (under construction).
