//! Compile-fail and compile-pass cases for subzero-core lifecycles; see tests/compiletest.rs.
