//! `read`, `write`, `edit`, `ls`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};

use rustix::io::Errno;
use serde::Deserialize;

use super::beneath::{BeneathError, Workspace};
use super::{MAX_RESULT_BYTES, ToolContext, ToolOutput, display, looks_binary, resolve};

#[derive(Debug, Deserialize)]
pub struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: u64,
    #[serde(default)]
    limit: Option<u64>,
}

pub fn read(ctx: &ToolContext, args: ReadArgs) -> Result<ToolOutput, ToolOutput> {
    let path = resolve(&ctx.root, &args.path)?;
    let shown = display(&ctx.root, &path);
    let meta = std::fs::metadata(&path)
        .map_err(|e| ToolOutput::error(format!("cannot read {shown}: {e}")))?;
    if meta.is_dir() {
        return Err(ToolOutput::error(format!("{shown} is a directory; use ls")));
    }
    let size = meta.len();
    let mut file = std::fs::File::open(&path)
        .map_err(|e| ToolOutput::error(format!("cannot read {shown}: {e}")))?;
    let mut head = vec![0u8; 8192];
    let n = file.read(&mut head).map_err(io_error(&shown))?;
    if looks_binary(&head[..n]) {
        return Err(ToolOutput::error(format!(
            "{shown} is a binary file ({size} bytes); read only reads text"
        )));
    }
    let limit = args
        .limit
        .unwrap_or(MAX_RESULT_BYTES as u64)
        .clamp(1, MAX_RESULT_BYTES as u64);
    if args.offset >= size && size > 0 {
        return Err(ToolOutput::error(format!(
            "offset {} is past the end of {shown} ({size} bytes)",
            args.offset
        )));
    }
    file.seek(SeekFrom::Start(args.offset))
        .map_err(io_error(&shown))?;
    // Read a few bytes more so a character cut by the window can be completed or dropped.
    let mut buf = Vec::new();
    file.take(limit + 3)
        .read_to_end(&mut buf)
        .map_err(io_error(&shown))?;
    let mut start = 0;
    while start < buf.len() && start < 3 && (buf[start] & 0xC0) == 0x80 {
        start += 1;
    }
    let mut end = usize::try_from(limit).unwrap_or(usize::MAX).min(buf.len());
    while end > start && end < buf.len() && (buf[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    let text = std::str::from_utf8(&buf[start..end])
        .map_err(|_| ToolOutput::error(format!("{shown} is not UTF-8 text")))?;
    let first = args.offset + start as u64;
    let next = args.offset + end as u64;
    let mut out = text.to_owned();
    if next < size || first > 0 {
        out.push_str(&format!(
            "\n[read: bytes {first}..{next} of {size}{}]",
            if next < size {
                format!("; continue with offset={next}")
            } else {
                String::new()
            }
        ));
    }
    Ok(ToolOutput::ok(out))
}

fn io_error(shown: &str) -> impl Fn(std::io::Error) -> ToolOutput + '_ {
    move |e| ToolOutput::error(format!("cannot read {shown}: {e}"))
}

#[derive(Debug, Deserialize)]
pub struct WriteArgs {
    path: String,
    content: String,
}

pub fn write(ctx: &ToolContext, args: WriteArgs) -> Result<ToolOutput, ToolOutput> {
    let rel = workspace_path(&ctx.root, &args.path)?;
    let shown = display(Path::new(""), &rel);
    let mut file = Workspace::open(&ctx.root)
        .and_then(|ws| ws.create_file(&rel))
        .map_err(|e| refused(&shown, "write", &e))?;
    file.write_all(args.content.as_bytes())
        .map_err(|e| ToolOutput::error(format!("cannot write {shown}: {e}")))?;
    Ok(ToolOutput::ok(format!(
        "wrote {} bytes to {shown}",
        args.content.len()
    )))
}

/// `path` below the root by name only, for `write` and `edit`: `.` is dropped, `..` is kept for
/// the kernel to judge after following links, and an absolute path must start with the root.
/// Where it actually leads is settled by the open in [`Workspace`], not here.
fn workspace_path(root: &Path, path: &str) -> Result<PathBuf, ToolOutput> {
    let path = Path::new(path);
    let below = match path.strip_prefix(root) {
        Ok(below) => below,
        Err(_) if path.is_absolute() => {
            return Err(ToolOutput::error(format!(
                "{} is outside the workspace",
                path.display()
            )));
        }
        Err(_) => path,
    };
    Ok(below
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect())
}

/// The tool error for a path `write`/`edit` could not open beneath the root.
fn refused(shown: &str, verb: &str, error: &BeneathError) -> ToolOutput {
    ToolOutput::error(match error {
        BeneathError::Outside => format!(
            "{shown} resolves outside the workspace (through a symlink or ..); {verb} inside the workspace"
        ),
        BeneathError::Symlink => format!(
            "{shown} goes through a symlink, and without openat2 on this kernel {verb} cannot tell whether it stays inside the workspace; {verb} the real path instead"
        ),
        BeneathError::Os(Errno::ISDIR) => format!("{shown} is a directory"),
        BeneathError::Os(e) => format!("cannot {verb} {shown}: {}", std::io::Error::from(*e)),
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

pub fn edit(ctx: &ToolContext, args: EditArgs) -> Result<ToolOutput, ToolOutput> {
    let rel = workspace_path(&ctx.root, &args.path)?;
    let shown = display(Path::new(""), &rel);
    if args.old_text.is_empty() {
        return Err(ToolOutput::error("oldText must not be empty"));
    }
    // One open, read and rewritten through the same fd: nothing can be swapped in between.
    let mut file = Workspace::open(&ctx.root)
        .and_then(|ws| ws.open_existing(&rel))
        .map_err(|e| refused(&shown, "edit", &e))?;
    let is_file = file.metadata().map_err(io_error(&shown))?.is_file();
    if !is_file {
        return Err(ToolOutput::error(format!("{shown} is not a regular file")));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_error(&shown))?;
    if looks_binary(&bytes) {
        return Err(ToolOutput::error(format!("{shown} is a binary file")));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolOutput::error(format!("{shown} is not UTF-8 text")))?;
    let count = text.matches(args.old_text.as_str()).count();
    match count {
        0 => Err(ToolOutput::error(format!(
            "oldText was not found in {shown}; read the file and copy the text exactly"
        ))),
        1 => {
            let updated = text.replacen(args.old_text.as_str(), &args.new_text, 1);
            rewrite(&mut file, updated.as_bytes())
                .map_err(|e| ToolOutput::error(format!("cannot write {shown}: {e}")))?;
            Ok(ToolOutput::ok(format!("edited {shown}")))
        }
        n => Err(ToolOutput::error(format!(
            "oldText occurs {n} times in {shown}; include more surrounding text so it is unique"
        ))),
    }
}

/// Replaces the whole content of an open file.
fn rewrite(file: &mut File, content: &[u8]) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(content)
}

#[derive(Debug, Deserialize)]
pub struct LsArgs {
    #[serde(default)]
    path: Option<String>,
}

/// Most entries `ls` lists.
const MAX_ENTRIES: usize = 1000;

pub fn ls(ctx: &ToolContext, args: LsArgs) -> Result<ToolOutput, ToolOutput> {
    let path = resolve(&ctx.root, args.path.as_deref().unwrap_or("."))?;
    let shown = display(&ctx.root, &path);
    let entries = std::fs::read_dir(&path)
        .map_err(|e| ToolOutput::error(format!("cannot list {shown}: {e}")))?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let mut name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            name
        })
        .collect();
    names.sort();
    let total = names.len();
    names.truncate(MAX_ENTRIES);
    let mut out = names.join("\n");
    if total > MAX_ENTRIES {
        out.push_str(&format!("\n[{MAX_ENTRIES} of {total} entries shown]"));
    }
    if total == 0 {
        out = format!("{shown} is empty");
    }
    Ok(ToolOutput::ok(super::cap(out, MAX_RESULT_BYTES)))
}
