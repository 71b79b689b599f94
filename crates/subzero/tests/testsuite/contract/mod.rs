//! The generated bindings (TypeScript, Python) against the real broker's answers.

mod bindings;
