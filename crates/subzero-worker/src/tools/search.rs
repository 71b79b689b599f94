//! `grep` (regex over file contents) and `find` (glob over paths). Both walk the workspace
//! with the `ignore` crate, so `.gitignore`, `.ignore` and hidden files are respected even
//! outside a git repository.

use std::io::Read;
use std::path::Path;

use globset::{Glob, GlobMatcher};
use serde::Deserialize;

use super::{MAX_RESULT_BYTES, ToolContext, ToolOutput, display, looks_binary, resolve};

/// Files larger than this are not searched by `grep`.
const MAX_GREP_FILE: u64 = 8 * 1024 * 1024;
/// Longest line shown by `grep`.
const MAX_LINE: usize = 400;

fn walker(root: &Path) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .require_git(false)
        .follow_links(false)
        .build()
}

fn matcher(pattern: &str) -> Result<GlobMatcher, ToolOutput> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolOutput::error(format!("invalid glob {pattern}: {e}")))
}

/// A glob without `/` matches a file name at any depth; otherwise the relative path.
fn glob_matches(matcher: &GlobMatcher, pattern: &str, rel: &Path) -> bool {
    if pattern.contains('/') {
        matcher.is_match(rel)
    } else {
        rel.file_name().is_some_and(|n| matcher.is_match(n))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    ignore_case: bool,
    #[serde(default)]
    max_matches: Option<usize>,
}

pub fn grep(ctx: &ToolContext, args: GrepArgs) -> Result<ToolOutput, ToolOutput> {
    let regex = regex::RegexBuilder::new(&args.pattern)
        .case_insensitive(args.ignore_case)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ToolOutput::error(format!("invalid regex: {e}")))?;
    let base = resolve(&ctx.root, args.path.as_deref().unwrap_or("."))?;
    if !base.exists() {
        return Err(ToolOutput::error(format!(
            "{} does not exist",
            display(&ctx.root, &base)
        )));
    }
    let glob = match &args.glob {
        Some(g) => Some((matcher(g)?, g.clone())),
        None => None,
    };
    let max = args.max_matches.unwrap_or(100).clamp(1, 1000);
    let mut lines = Vec::new();
    let mut more = false;
    'files: for entry in walker(&base).filter_map(Result::ok) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry.path().strip_prefix(&ctx.root).unwrap_or(entry.path());
        if let Some((m, pattern)) = &glob
            && !glob_matches(m, pattern, rel)
        {
            continue;
        }
        let Some(text) = text_of(entry.path()) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if regex.is_match(line) {
                if lines.len() == max {
                    more = true;
                    break 'files;
                }
                lines.push(format!("{}:{}:{}", rel.display(), n + 1, clip(line)));
            }
        }
    }
    if lines.is_empty() {
        return Ok(ToolOutput::ok("no matches"));
    }
    let mut out = lines.join("\n");
    if more {
        out.push_str(&format!("\n[first {max} matches shown; narrow the search]"));
    }
    Ok(ToolOutput::ok(super::cap(out, MAX_RESULT_BYTES)))
}

fn text_of(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_GREP_FILE {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_GREP_FILE).read_to_end(&mut bytes).ok()?;
    if looks_binary(&bytes) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn clip(line: &str) -> &str {
    if line.len() <= MAX_LINE {
        return line;
    }
    let mut cut = MAX_LINE;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    &line[..cut]
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    max_results: Option<usize>,
}

pub fn find(ctx: &ToolContext, args: FindArgs) -> Result<ToolOutput, ToolOutput> {
    let m = matcher(&args.pattern)?;
    let base = resolve(&ctx.root, args.path.as_deref().unwrap_or("."))?;
    let max = args.max_results.unwrap_or(200).clamp(1, 5000);
    let mut found = Vec::new();
    let mut more = false;
    for entry in walker(&base).filter_map(Result::ok) {
        let rel = entry.path().strip_prefix(&ctx.root).unwrap_or(entry.path());
        if rel.as_os_str().is_empty() || !glob_matches(&m, &args.pattern, rel) {
            continue;
        }
        if found.len() == max {
            more = true;
            break;
        }
        let mut shown = rel.display().to_string();
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            shown.push('/');
        }
        found.push(shown);
    }
    if found.is_empty() {
        return Ok(ToolOutput::ok("no files found"));
    }
    found.sort();
    let mut out = found.join("\n");
    if more {
        out.push_str(&format!("\n[first {max} results shown]"));
    }
    Ok(ToolOutput::ok(super::cap(out, MAX_RESULT_BYTES)))
}
