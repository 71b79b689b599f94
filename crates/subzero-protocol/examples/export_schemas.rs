//! Prints every exported schema as one JSON object `{stem: schema}`.
//! `cargo xtask codegen` runs this after regenerating the Rust types, so the exported
//! schemas come from freshly compiled types.

fn main() -> std::process::ExitCode {
    let all = subzero_protocol::export::exported_schemas();
    match serde_json::to_string(&all) {
        Ok(text) => {
            println!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot serialize exported schemas: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
