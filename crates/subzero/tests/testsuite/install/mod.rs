//! What an install lays out and how the three binaries find each other.

mod arm64;
mod cargo_install;
mod layout;
mod npm;
mod server_json;
