//! `read`, `write`, `edit`, `ls`.

use std::io::{Read, Seek, SeekFrom};

use serde::Deserialize;

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
    let path = resolve(&ctx.root, &args.path)?;
    let shown = display(&ctx.root, &path);
    if path.is_dir() {
        return Err(ToolOutput::error(format!("{shown} is a directory")));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolOutput::error(format!("cannot create {shown}: {e}")))?;
    }
    std::fs::write(&path, args.content.as_bytes())
        .map_err(|e| ToolOutput::error(format!("cannot write {shown}: {e}")))?;
    Ok(ToolOutput::ok(format!(
        "wrote {} bytes to {shown}",
        args.content.len()
    )))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

pub fn edit(ctx: &ToolContext, args: EditArgs) -> Result<ToolOutput, ToolOutput> {
    let path = resolve(&ctx.root, &args.path)?;
    let shown = display(&ctx.root, &path);
    if args.old_text.is_empty() {
        return Err(ToolOutput::error("oldText must not be empty"));
    }
    let bytes =
        std::fs::read(&path).map_err(|e| ToolOutput::error(format!("cannot read {shown}: {e}")))?;
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
            std::fs::write(&path, updated.as_bytes())
                .map_err(|e| ToolOutput::error(format!("cannot write {shown}: {e}")))?;
            Ok(ToolOutput::ok(format!("edited {shown}")))
        }
        n => Err(ToolOutput::error(format!(
            "oldText occurs {n} times in {shown}; include more surrounding text so it is unique"
        ))),
    }
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
