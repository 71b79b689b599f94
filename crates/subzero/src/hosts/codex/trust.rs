//! Codex's project trust: `[projects."<dir>"] trust_level = "trusted"` in the user file, read
//! for the next steps and written by `--trust`.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, Value};

use super::config_path;
use crate::hosts::{ExtraEdit, HostEnv, HostsError, Scope, edit};

/// The user file (where Codex keeps project trust).
fn user_config(env: &HostEnv) -> Result<PathBuf, HostsError> {
    config_path(Scope::User, Path::new(""), env)
}

/// The next step about project trust: Codex reads a project file only for a trusted project.
pub(super) fn trust_step(project_dir: &Path, env: &HostEnv) -> String {
    let dir = project_dir.display();
    let Ok(file) = user_config(env) else {
        return format!(
            "trust: Codex reads {dir}/.codex/config.toml only for a trusted project: start \
             `codex` there once and trust it, or run install again with --trust."
        );
    };
    let trusted = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| t.parse::<DocumentMut>().ok())
        .is_some_and(|doc| trust_level(&doc, project_dir) == Some("trusted"));
    if trusted {
        return format!(
            "trust: {dir} is trusted in {}, so Codex reads its .codex/config.toml.",
            file.display()
        );
    }
    format!(
        "trust: Codex ignores {dir}/.codex/config.toml, silently, until the project is trusted: \
         start `codex` there once and trust it, or run install again with --trust (adds \
         [projects.\"{dir}\"] trust_level = \"trusted\" to {}).",
        file.display()
    )
}

fn trust_level<'d>(doc: &'d DocumentMut, project_dir: &Path) -> Option<&'d str> {
    doc.get("projects")?
        .as_table_like()?
        .get(&project_dir.to_string_lossy())?
        .as_table_like()?
        .get("trust_level")?
        .as_str()
}

/// `--trust`: `[projects."<dir>"] trust_level = "trusted"` in the user's Codex config.
pub(in crate::hosts) fn trust_edit(
    project_dir: &Path,
    env: &HostEnv,
) -> Result<ExtraEdit, HostsError> {
    let path = edit::resolve_symlink(&user_config(env)?);
    let original = edit::read_optional(&path)?;
    let text = original.as_deref().unwrap_or("");
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|err: toml_edit::TomlError| HostsError::InvalidToml {
                path: path.clone(),
                message: err.to_string().trim().to_owned(),
            })?;
    let dir = project_dir.to_string_lossy().into_owned();
    let updated = if trust_level(&doc, project_dir) == Some("trusted") {
        text.to_owned()
    } else {
        let root = doc.as_table_mut();
        if !root.contains_key("projects") {
            let mut projects = Table::new();
            projects.set_implicit(true);
            root.insert("projects", Item::Table(projects));
        }
        let shape_err = |key: String, found| HostsError::UnexpectedShape {
            path: path.clone(),
            key,
            found,
            expected: "a table",
        };
        let projects = root
            .get_mut("projects")
            .and_then(Item::as_table_like_mut)
            .ok_or_else(|| shape_err("projects".to_owned(), "not a table"))?;
        if projects.get(&dir).is_none() {
            let mut project = Table::new();
            if !text.trim().is_empty() {
                project.decor_mut().set_prefix("\n");
            }
            projects.insert(&dir, Item::Table(project));
        }
        let project = projects
            .get_mut(&dir)
            .and_then(Item::as_table_like_mut)
            .ok_or_else(|| shape_err(format!("projects.\"{dir}\""), "not a table"))?;
        project.insert("trust_level", Item::Value(Value::from("trusted")));
        doc.to_string()
    };
    Ok(ExtraEdit {
        path,
        original,
        updated,
        what: format!("{dir} is trusted, so Codex reads its .codex/config.toml"),
    })
}
