//! What an install lays out and how the three binaries find each other.

mod cargo_install;
mod layout;
mod server_json;
