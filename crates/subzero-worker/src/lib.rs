//! subzero-worker (under construction).
