//! Compile-fail cases checked against the build that is already there.
//!
//! Each case is handed to `rustc` once (`--emit=metadata`: type and borrow checking, no code)
//! with the workspace's own build of the crates it uses as its `--extern`s, from this test
//! binary's `deps/` directory. The case must fail, and its diagnostics, with the machine's
//! paths and the other crates' line numbers taken out, must equal its committed `.stderr`.
//! `SUBZERO_BLESS=1` writes what the compiler said instead.
//!
//! A separate build of the cases' dependencies (what a compile-fail harness with a project of
//! its own does) checked the whole tree again — two minutes of processor on every run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates a case may name, besides the standard library.
const EXTERNS: [&str; 4] = [
    "subzero_ui_tests",
    "subzero_core",
    "subzero_runtime",
    "serde_json",
];

/// Which build of each extern a case gets: for each crate in order, a program that ties it
/// to the ones chosen before it (a type or trait of one in the other's API), so a stale rlib
/// beside the current one (a build with other features) is never mixed in.
const PROBES: [&str; 4] = [
    "fn main() { let _ = subzero_ui_tests::running; }",
    "fn main() {
        let _: subzero_core::lifecycle::Child<subzero_core::lifecycle::child::Running> =
            subzero_ui_tests::running();
    }",
    "use subzero_core::lifecycle::{CheckoutDecided, checkout::InUse};
    fn write(store: &subzero_runtime::store::Store, decided: CheckoutDecided<InUse>) {
        let _ = store.write_checkout(decided);
    }
    fn main() { let _ = write; }",
    "fn main() { let _ = serde_json::from_str::<subzero_core::ChildId>(\"ch_x\"); }",
];

/// What checks one case: the compiler, its flags and the `--extern`s.
pub struct Checker {
    workspace: PathBuf,
    deps: PathBuf,
    out: PathBuf,
    externs: Vec<(&'static str, PathBuf)>,
}

impl Checker {
    /// The checker for this test binary's build: its `deps/` directory holds the rlibs.
    pub fn for_this_build(workspace: &Path) -> Result<Checker, String> {
        let exe = std::env::current_exe().map_err(|e| format!("this test binary: {e}"))?;
        let deps = exe
            .parent()
            .ok_or("this test binary has no directory")?
            .to_path_buf();
        let out = deps.join("../tmp/compile-fail");
        std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {out:?}: {e}"))?;
        let candidates: Vec<Vec<PathBuf>> = EXTERNS
            .iter()
            .map(|name| rlibs(&deps, name))
            .collect::<Result<_, _>>()?;
        let mut checker = Checker {
            workspace: workspace.to_path_buf(),
            deps,
            out,
            externs: Vec::new(),
        };
        for ((name, candidates), probe) in EXTERNS.iter().zip(candidates).zip(PROBES) {
            checker.choose(name, candidates, probe)?;
        }
        Ok(checker)
    }

    /// Adds the newest of `candidates` for `name` that compiles `probe` with the externs
    /// chosen so far.
    fn choose(
        &mut self,
        name: &'static str,
        candidates: Vec<PathBuf>,
        probe: &str,
    ) -> Result<(), String> {
        let file = self.out.join(format!("probe_{name}.rs"));
        std::fs::write(&file, probe).map_err(|e| format!("cannot write {file:?}: {e}"))?;
        let mut last = String::new();
        for rlib in candidates {
            self.externs.push((name, rlib));
            let (ok, said) = self.check(&file, "probe")?;
            if ok {
                return Ok(());
            }
            self.externs.pop();
            last = said;
        }
        Err(format!(
            "no lib{name}-*.rlib in {:?} fits the others (a stale build? `cargo clean -p subzero-ui-tests` and run again); the compiler said:\n{last}",
            self.deps
        ))
    }

    /// Checks one file; whether it compiled, and what the compiler said.
    pub fn check(&self, file: &Path, name: &str) -> Result<(bool, String), String> {
        let mut rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
        rustc
            .current_dir(&self.workspace)
            .args([
                "--edition",
                "2024",
                "--crate-type",
                "bin",
                "--crate-name",
                name,
            ])
            .args([
                "--emit=metadata",
                "-A",
                "dead_code",
                "--diagnostic-width=140",
                "--verbose",
            ])
            .args(["--color=never", "-o"])
            .arg(self.out.join(format!("{name}.rmeta")))
            .arg("-L")
            .arg(format!("dependency={}", self.deps.display()));
        for (crate_name, rlib) in &self.externs {
            rustc
                .arg("--extern")
                .arg(format!("{crate_name}={}", rlib.display()));
        }
        let output = rustc
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run rustc: {e}"))?;
        Ok((
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }
}

/// `lib<name>-*.rlib` in `deps`, newest first.
fn rlibs(deps: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let prefix = format!("lib{name}-");
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .map_err(|e| format!("cannot read {deps:?}: {e}"))?
        .filter_map(Result::ok)
        .filter(|e| {
            let file = e.file_name();
            let file = file.to_string_lossy();
            file.starts_with(&prefix) && file.ends_with(".rlib")
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if found.is_empty() {
        return Err(format!(
            "no {prefix}*.rlib in {deps:?}: build the tests with cargo first"
        ));
    }
    found.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

/// The compiler's diagnostics for a case, without what changes between machines and
/// builds: the case's path is `tests/ui/<case>.rs`; another crate's source is named from
/// `$WORKSPACE`, `$CARGO` (the registry) or `$RUST` (the standard library) without its line
/// numbers; counts of further candidates are `$N`; the closing summary lines are dropped.
pub fn normalize(stderr: &str, case_dir: &str) -> String {
    let mut blocks: Vec<Block> = Vec::new();
    let mut foreign = false;
    for line in stderr.lines() {
        if line.starts_with("error: aborting due to")
            || line.starts_with("For more information about")
            || line.starts_with("Some errors have detailed explanations")
        {
            continue;
        }
        if blocks.is_empty() || line.starts_with("error") || line.starts_with("warning") {
            blocks.push(Block::default());
        }
        let block = blocks.last_mut().expect("a block");
        if line.starts_with(|c: char| c.is_ascii_alphabetic()) {
            // A sub-diagnostic without a location of its own (a suggestion) is the case's.
            foreign = false;
        }
        if let Some((arrow, path)) = location(line) {
            foreign = !path.starts_with(case_dir);
            block
                .lines
                .push(format!("{arrow}{}", name_path(path, case_dir)));
            continue;
        }
        let digits = gutter_digits(line);
        block.widest = block.widest.max(digits);
        if foreign {
            block.lines.push(others(&hide_gutter(line)));
        } else {
            block.widest_own = block.widest_own.max(digits);
            block.lines.push(others(line));
        }
    }
    let text: String = blocks
        .iter()
        .map(Block::text)
        .collect::<Vec<_>>()
        .join("\n");
    let mut text = shorten_lists(&text);
    while text.ends_with('\n') {
        text.pop();
    }
    text.push('\n');
    text
}

/// One diagnostic: its lines, and the widest line numbers in its gutter (of any file, and
/// of the case's own lines).
#[derive(Default)]
struct Block {
    lines: Vec<String>,
    widest: usize,
    widest_own: usize,
}

impl Block {
    /// The lines, with the gutter as wide as the case's own line numbers need (another
    /// crate's line numbers are hidden, so they must not widen it).
    fn text(&self) -> String {
        let extra = self.widest.saturating_sub(self.widest_own.max(1));
        let pad = " ".repeat(extra);
        self.lines
            .iter()
            .map(|line| line.strip_prefix(pad.as_str()).unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The digits of a snippet line's number (`123 | code`), or 0.
fn gutter_digits(line: &str) -> usize {
    let trimmed = line.trim_start();
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && trimmed[digits..].starts_with(" |") {
        digits
    } else {
        0
    }
}

/// The compiler's lists of implementations (`the following other types implement …`) cut
/// to their first [`LISTED`] entries and `and $N others`, as the compiler prints them
/// without `--verbose` (which the full type names elsewhere need).
fn shorten_lists(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut list: Option<(usize, usize)> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some((item_indent, listed)) = list {
            if indent == item_indent {
                if listed < LISTED {
                    out.push(line.to_owned());
                } else if listed == LISTED {
                    out.push(format!("{}and $N others", " ".repeat(item_indent - 2)));
                }
                list = Some((item_indent, listed + 1));
                continue;
            }
            list = None;
        }
        if line.trim_start().starts_with("= help: the following") && line.trim_end().ends_with(':')
        {
            list = Some((indent + 10, 0));
        }
        out.push(line.to_owned());
    }
    out.join("\n")
}

/// How many entries of an implementation list the compiler shows.
const LISTED: usize = 8;

/// `  --> path:line:col` or `  ::: path:line:col`: the prefix up to the path, and the path.
fn location(line: &str) -> Option<(&str, &str)> {
    let at = line.find("--> ").or_else(|| line.find("::: "))?;
    if !line[..at].chars().all(|c| c == ' ') {
        return None;
    }
    Some((&line[..at + 4], &line[at + 4..]))
}

/// A diagnostic's path, named as in the committed `.stderr` files.
fn name_path(path: &str, case_dir: &str) -> String {
    if let Some(rest) = path.strip_prefix(case_dir) {
        return format!("tests/ui/{rest}");
    }
    let path = strip_position(path);
    if let Some(at) = path.find("/registry/src/") {
        let rest = &path[at + "/registry/src/".len()..];
        let rest = rest.split_once('/').map_or(rest, |(_, rest)| rest);
        return format!("$CARGO/{}", unversioned(rest));
    }
    if let Some(at) = path.find("/library/") {
        return format!("$RUST/{}", &path[at + "/library/".len()..]);
    }
    format!("$WORKSPACE/{}", path.trim_start_matches("./"))
}

/// `serde_json-1.0.154/src/de.rs` → `serde_json-$VERSION/src/de.rs`.
fn unversioned(path: &str) -> String {
    let (dir, rest) = path.split_once('/').unwrap_or((path, ""));
    match dir.rfind('-') {
        Some(at) if dir[at + 1..].starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{}-$VERSION/{rest}", &dir[..at])
        }
        _ => path.to_owned(),
    }
}

/// `file.rs:12:5` → `file.rs`.
fn strip_position(path: &str) -> &str {
    let mut path = path;
    for _ in 0..2 {
        if let Some((head, tail)) = path.rsplit_once(':')
            && !tail.is_empty()
            && tail.chars().all(|c| c.is_ascii_digit())
        {
            path = head;
        }
    }
    path
}

/// A snippet line of another crate's source, with its line number blanked.
fn hide_gutter(line: &str) -> String {
    let digits = line
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .count();
    let lead = line.len() - line.trim_start().len();
    if digits == 0 || !line[lead + digits..].starts_with(" |") {
        return line.to_owned();
    }
    format!("{}{}", " ".repeat(lead + digits), &line[lead + digits..])
}

/// `and 3 others` → `and $N others`.
fn others(line: &str) -> String {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix("and ")
        && let Some((count, tail)) = rest.split_once(' ')
        && count.chars().all(|c| c.is_ascii_digit())
        && tail.starts_with("other")
    {
        let lead = &line[..line.len() - trimmed.len()];
        return format!("{lead}and $N {tail}");
    }
    line.to_owned()
}
