//! subzero-runtime (under construction).
