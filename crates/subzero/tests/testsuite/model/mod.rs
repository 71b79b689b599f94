//! The real-model tier: children on llama.cpp with a small model.

mod llama_cpp;
mod llama_cpp_compaction;
