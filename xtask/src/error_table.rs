//! The table of error codes: `$defs/ErrorCode` of `schema-src/v1/error.schema.json`, a
//! `oneOf` of `{const, description}` whose description is `<meaning> Next step: <step>`.
//!
//! It is the one source of the codes: `cargo xtask codegen` writes the core's Rust enum
//! (`generated/core/error_code.rs`, with the meaning and the next step of every code), the
//! code table of `docs/troubleshooting.md` and the code list of `docs/protocol.md`
//! (between markers), and `cargo xtask check` fails when any of them is stale or when
//! `docs/troubleshooting.md` lacks a section for a code (or has one for no code).

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::codegen::GeneratedFile;
use crate::source::SourceSet;

/// What separates a code's meaning from the caller's next step in its description.
pub const NEXT_STEP: &str = " Next step: ";

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCodeRow {
    /// The wire spelling, e.g. `stale_run`.
    pub code: String,
    /// What it means.
    pub meaning: String,
    /// What the caller does next.
    pub next_step: String,
}

/// The table, in schema order.
pub fn rows(set: &SourceSet) -> Result<Vec<ErrorCodeRow>, String> {
    let file = "schema-src/v1/error.schema.json";
    let schema = set.get("error").ok_or(format!("{file} is missing"))?;
    let variants = schema
        .doc
        .pointer("/$defs/ErrorCode/oneOf")
        .and_then(Value::as_array)
        .ok_or(format!(
            "{file}: $defs/ErrorCode must be a oneOf of {{const, description}}"
        ))?;
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (i, variant) in variants.iter().enumerate() {
        let code = variant.get("const").and_then(Value::as_str);
        let description = variant.get("description").and_then(Value::as_str);
        let (Some(code), Some(description)) = (code, description) else {
            problems.push(format!(
                "{file} #/$defs/ErrorCode/oneOf/{i}: needs a string const and a description"
            ));
            continue;
        };
        let valid_code = code.starts_with(|c: char| c.is_ascii_lowercase())
            && code
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_code {
            problems.push(format!(
                "{file}: error code {code:?} must be snake_case ([a-z][a-z0-9_]*)"
            ));
        }
        match description.split_once(NEXT_STEP) {
            Some((meaning, step))
                if !meaning.is_empty() && !step.is_empty() && !step.contains(NEXT_STEP) =>
            {
                rows.push(ErrorCodeRow {
                    code: code.to_string(),
                    meaning: meaning.to_string(),
                    next_step: step.to_string(),
                });
            }
            _ => problems.push(format!(
                "{file}: the description of {code} must read \"<meaning>{NEXT_STEP}<what the caller does next>\""
            )),
        }
    }
    if problems.is_empty() {
        Ok(rows)
    } else {
        Err(problems.join("\n"))
    }
}

/// `invalid_request` → `InvalidRequest`.
fn variant_name(code: &str) -> String {
    code.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// `generated/core/error_code.rs`: the core's `ErrorCode`.
pub fn core_enum(rows: &[ErrorCodeRow]) -> Result<GeneratedFile, String> {
    let mut src = String::from(
        "/// A stable, snake_case error code: one row of the table in\n\
         /// `schema-src/v1/error.schema.json`, whose meaning and next step each variant documents.\n\
         #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]\n\
         pub enum ErrorCode {\n",
    );
    for row in rows {
        src += &format!(
            "#[doc = {meaning:?}]\n#[doc = \"\"]\n#[doc = {step:?}]\n#[serde(rename = {code:?})]\n{name},\n",
            meaning = format!(" {}", row.meaning),
            step = format!(" Next step: {}", row.next_step),
            code = row.code,
            name = variant_name(&row.code),
        );
    }
    src += "}\n\nimpl ErrorCode {\n";
    src += &format!(
        "/// Every code, in table order.\npub const ALL: [ErrorCode; {}] = [{}];\n",
        rows.len(),
        rows.iter()
            .map(|r| format!("ErrorCode::{}", variant_name(&r.code)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (function, doc, text) in [
        (
            "as_str",
            "The wire spelling.",
            &(|r: &ErrorCodeRow| r.code.clone()) as &dyn Fn(&ErrorCodeRow) -> String,
        ),
        ("meaning", "What the code means.", &|r| r.meaning.clone()),
        (
            "next_step",
            "What the caller does next when it gets this code.",
            &|r| r.next_step.clone(),
        ),
    ] {
        let arms: String = rows
            .iter()
            .map(|r| format!("ErrorCode::{} => {:?},\n", variant_name(&r.code), text(r)))
            .collect();
        src += &format!(
            "/// {doc}\npub const fn {function}(self) -> &'static str {{\nmatch self {{\n{arms}}}\n}}\n"
        );
    }
    src += "/// Parse the wire spelling.\npub fn parse(text: &str) -> Option<Self> {\nSelf::ALL.into_iter().find(|c| c.as_str() == text)\n}\n}\n";
    let file =
        syn::parse_file(&src).map_err(|e| format!("generated ErrorCode does not parse: {e}"))?;
    Ok(GeneratedFile {
        rel_path: "generated/core/error_code.rs".to_string(),
        text: format!(
            "// @generated by `cargo xtask codegen` from the error code table in schema-src/v1/error.schema.json.\n\
             // Do not edit by hand: change the schema and run `cargo xtask codegen`.\n\n{}",
            prettyplease::unparse(&file)
        ),
    })
}

/// A section of a hand-written document that codegen owns, between two marker lines.
#[derive(Debug, Clone)]
struct DocSection {
    rel_path: &'static str,
    name: &'static str,
    body: String,
}

fn begin_marker(name: &str) -> String {
    format!(
        "<!-- BEGIN {name}: generated by `cargo xtask codegen` from schema-src/v1/error.schema.json; do not edit -->"
    )
}

fn end_marker(name: &str) -> String {
    format!("<!-- END {name} -->")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn sections(rows: &[ErrorCodeRow]) -> Vec<DocSection> {
    let mut table = String::from("| code | meaning | next step |\n|---|---|---|\n");
    for row in rows {
        table += &format!(
            "| [`{code}`](#{code}) | {} | {} |\n",
            cell(&row.meaning),
            cell(&row.next_step),
            code = row.code
        );
    }
    let list = rows
        .iter()
        .map(|r| format!("`{}`", r.code))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        DocSection {
            rel_path: "docs/troubleshooting.md",
            name: "error-code-table",
            body: table,
        },
        DocSection {
            rel_path: "docs/protocol.md",
            name: "error-code-list",
            body: format!("{list}.\n"),
        },
    ]
}

/// `text` with the section between the markers replaced by `section.body`.
fn splice(text: &str, section: &DocSection) -> Result<String, String> {
    let (begin, end) = (begin_marker(section.name), end_marker(section.name));
    let missing = || {
        format!(
            "{} has no generated section {}: add the lines\n{begin}\n{end}",
            section.rel_path, section.name
        )
    };
    let start = text.find(&begin).ok_or_else(missing)?;
    let after_begin = start + begin.len();
    let stop = text[after_begin..].find(&end).ok_or_else(missing)? + after_begin;
    Ok(format!(
        "{}\n{}{}",
        &text[..after_begin],
        section.body,
        &text[stop..]
    ))
}

/// The documents with their generated sections as they must be (read from `root`).
pub fn doc_files(root: &Path, rows: &[ErrorCodeRow]) -> Result<Vec<GeneratedFile>, String> {
    let mut files: Vec<GeneratedFile> = Vec::new();
    for section in sections(rows) {
        let current = match files.iter().find(|f| f.rel_path == section.rel_path) {
            Some(file) => file.text.clone(),
            None => fs::read_to_string(root.join(section.rel_path))
                .map_err(|e| format!("cannot read {}: {e}", section.rel_path))?,
        };
        let text = splice(&current, &section)?;
        files.retain(|f| f.rel_path != section.rel_path);
        files.push(GeneratedFile {
            rel_path: section.rel_path.to_string(),
            text,
        });
    }
    Ok(files)
}

/// Codes without a `### \`code\`` section in `docs/troubleshooting.md`, and sections that
/// name no code.
pub fn troubleshooting_sections(root: &Path, rows: &[ErrorCodeRow]) -> Vec<String> {
    let path = "docs/troubleshooting.md";
    let Ok(text) = fs::read_to_string(root.join(path)) else {
        return vec![format!("cannot read {path}")];
    };
    // The sections of `## Error codes`, up to the next `## ` heading.
    let headed: Vec<String> = text
        .lines()
        .skip_while(|line| *line != "## Error codes")
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| line.strip_prefix("### `"))
        .filter_map(|rest| rest.split_once('`').map(|(code, _)| code.to_string()))
        .collect();
    let mut problems = Vec::new();
    for row in rows {
        if !headed.contains(&row.code) {
            problems.push(format!(
                "{path} has no \"### `{}`\" section (when it happens, how to fix it)",
                row.code
            ));
        }
    }
    for code in &headed {
        if !rows.iter().any(|r| &r.code == code) {
            problems.push(format!(
                "{path} has a section for `{code}`, which is not in the error code table"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_replaced_between_its_markers_only() {
        let section = DocSection {
            rel_path: "doc.md",
            name: "x",
            body: "new\n".to_string(),
        };
        let text = format!(
            "before\n{}\nold\nlines\n{}\nafter\n",
            begin_marker("x"),
            end_marker("x")
        );
        assert_eq!(
            splice(&text, &section),
            Ok(format!(
                "before\n{}\nnew\n{}\nafter\n",
                begin_marker("x"),
                end_marker("x")
            ))
        );
        assert!(splice("no markers\n", &section).is_err());
    }

    #[test]
    fn variant_names_are_pascal_case() {
        assert_eq!(variant_name("invalid_request"), "InvalidRequest");
        assert_eq!(variant_name("busy"), "Busy");
    }
}
