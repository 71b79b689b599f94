//! subzero-testkit (under construction).
