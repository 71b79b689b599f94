//! Text written by others — a child, a model, a tool — made safe to print to a terminal.
//!
//! A child's answer, a model endpoint's error excerpt, a model name or a workspace path is
//! data that whoever steers the child controls. Printed as it is to a terminal, its control
//! sequences act on the terminal instead of being read: OSC 52 writes the user's clipboard,
//! OSC 0 retitles the window, CSI `2J` clears the screen and `8m` hides text, a bare CR
//! overwrites the line, U+202E shows what follows reversed. Every human view (`output`,
//! `show`, `logs`, `ls`, `watch`, `doctor`) prints such text through a [`Printing`], decided
//! once per command by [`Printing::of_stdout`]:
//!
//! - **On a terminal** (and without `--raw`): escaped. Each character below is replaced by a
//!   visible form made only of printable ASCII, which no terminal acts on:
//!   - every C0 control (U+0000–U+001F) and DEL: `\t`, `\n` and `\r` by name, the others as
//!     `\xHH` (ESC is `\x1b`, BEL `\x07`, DEL `\x7f`). Newline and tab are kept in multi-line
//!     text (an artifact, a `show` preview, a `watch` dialog) and escaped in one-line fields
//!     (a table cell, an event line, a `show` field), where they would break the layout;
//!   - the C1 controls U+0080–U+009F (some terminals read U+009B as CSI) as `\u{9b}`;
//!   - the bidi embeddings, overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069,
//!     U+200E, U+200F, U+061C) as `\u{202e}`.
//!
//!   Everything else, all other UTF-8 text included, is printed unchanged. A backslash is not
//!   escaped, so the form is not unambiguous: text that holds the four characters `\x1b`
//!   reads like an escaped ESC. The escape's job is that nothing in the text acts on the
//!   terminal, not a reversible encoding, and doubling every backslash would garble the code
//!   and paths children answer with; `--raw` (or `--json`) shows the exact text.
//!   `--json` on a terminal escapes the same characters the JSON way (`\u202e`, which
//!   `serde_json` leaves as they are), so the document still parses to the same value.
//! - **Piped** (stdout not a terminal): the bytes as they are, so `subzero output ART > file`
//!   is the artifact; one-line fields keep what they always did in a pipe (each control
//!   becomes a space, so a tab-separated record stays one line).
//! - **`--raw`** (`output`, `show`, `logs`, `ls`): the bytes as they are, everywhere.

use std::borrow::Cow;
use std::fmt::Write;
use std::io::IsTerminal;

/// How a command prints text written by others: decided once, from stdout and `--raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Printing {
    /// stdout is a terminal and no `--raw`: controls and bidi controls are escaped.
    Escaped,
    /// stdout is not a terminal: text as the views have always printed it to a pipe.
    Piped,
    /// `--raw`: the bytes as they are.
    Raw,
}

impl Printing {
    /// The one place that decides: escaped when stdout is a terminal, unless `raw`.
    pub fn of_stdout(raw: bool) -> Printing {
        Printing::choose(std::io::stdout().is_terminal(), raw)
    }

    fn choose(terminal: bool, raw: bool) -> Printing {
        match (raw, terminal) {
            (true, _) => Printing::Raw,
            (false, true) => Printing::Escaped,
            (false, false) => Printing::Piped,
        }
    }

    /// A field printed on one line: a table cell, an event's details, a `show` field.
    /// Escaped with newline and tab; piped, each control becomes a space.
    pub fn field(self, text: &str) -> Cow<'_, str> {
        match self {
            Printing::Escaped => escape(text, Lines::One),
            Printing::Piped => flatten(text),
            Printing::Raw => Cow::Borrowed(text),
        }
    }

    /// One line of a multi-line text printed line by line (a `show` preview): escaped
    /// keeping tabs; piped, each control becomes a space (as `show` always printed it).
    pub fn line(self, text: &str) -> Cow<'_, str> {
        match self {
            Printing::Escaped => escape(text, Lines::Many),
            Printing::Piped => flatten(text),
            Printing::Raw => Cow::Borrowed(text),
        }
    }

    /// Multi-line text printed whole (an artifact, a dialog): escaped keeping newlines and
    /// tabs; piped or raw, as it is.
    pub fn text(self, text: &str) -> Cow<'_, str> {
        match self {
            Printing::Escaped => escape(text, Lines::Many),
            Printing::Piped | Printing::Raw => Cow::Borrowed(text),
        }
    }

    /// A serialized JSON document: on a terminal, the characters JSON serializers leave as
    /// they are (DEL, C1, bidi controls; C0 is always escaped) become `\uXXXX` escapes, which
    /// decode to the same value.
    pub fn json(self, doc: &str) -> Cow<'_, str> {
        match self {
            Printing::Escaped => escape_json(doc),
            Printing::Piped | Printing::Raw => Cow::Borrowed(doc),
        }
    }
}

/// Whether escaped text may span lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lines {
    /// One line: newline and tab are escaped too.
    One,
    /// Many lines: newline and tab are kept.
    Many,
}

/// `text` with every C0 control, DEL, C1 control and bidi control replaced by its visible
/// form (see the module documentation); newline and tab kept with [`Lines::Many`].
/// Borrowed when there is nothing to escape.
pub fn escape(text: &str, lines: Lines) -> Cow<'_, str> {
    let acts = |c: char| match c {
        '\n' | '\t' => lines == Lines::One,
        c => acts_on_terminal(c),
    };
    if !text.chars().any(acts) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !acts(c) {
            out.push(c);
            continue;
        }
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// `text` with each control character (C0, DEL, C1) replaced by a space: the form one-line
/// fields have always had in a pipe. Bidi controls are kept.
pub fn flatten(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect(),
    )
}

/// A serialized JSON document with DEL, the C1 controls and the bidi controls written as
/// `\uXXXX`. Outside strings JSON is ASCII, so only string contents change, to escapes of
/// the same characters.
fn escape_json(doc: &str) -> Cow<'_, str> {
    if !doc.chars().any(acts_on_terminal) {
        return Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len() + 16);
    for c in doc.chars() {
        if acts_on_terminal(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal may act on `c` instead of showing it: the C0 and C1 controls and DEL
/// (Unicode's `Cc`), and the bidi embeddings, overrides, isolates and marks.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_is_on_only_on_a_terminal_without_raw() {
        assert_eq!(Printing::choose(true, false), Printing::Escaped);
        assert_eq!(Printing::choose(false, false), Printing::Piped);
        assert_eq!(Printing::choose(true, true), Printing::Raw);
        assert_eq!(Printing::choose(false, true), Printing::Raw);
    }

    #[test]
    fn terminal_sequences_become_visible_ascii() {
        let hostile = "a\x1b]52;c;aGk=\x07b\x1b]0;title\x07c\x1b[2Jd\x1b[8me";
        assert_eq!(
            escape(hostile, Lines::Many),
            "a\\x1b]52;c;aGk=\\x07b\\x1b]0;title\\x07c\\x1b[2Jd\\x1b[8me"
        );
        assert_eq!(escape("10%\rdone", Lines::Many), "10%\\rdone");
        assert_eq!(escape("nul\0 del\x7f", Lines::Many), "nul\\x00 del\\x7f");
        assert_eq!(escape("\x01\x1f", Lines::One), "\\x01\\x1f");
    }

    #[test]
    fn c1_controls_and_every_bidi_control_are_escaped_as_code_points() {
        assert_eq!(
            escape("x\u{9b}2Jy\u{85}", Lines::Many),
            "x\\u{9b}2Jy\\u{85}"
        );
        assert_eq!(escape("\u{80}\u{9f}", Lines::Many), "\\u{80}\\u{9f}");
        for (c, shown) in [
            ('\u{202a}', "\\u{202a}"),
            ('\u{202b}', "\\u{202b}"),
            ('\u{202c}', "\\u{202c}"),
            ('\u{202d}', "\\u{202d}"),
            ('\u{202e}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2067}', "\\u{2067}"),
            ('\u{2068}', "\\u{2068}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{061c}', "\\u{61c}"),
        ] {
            assert_eq!(escape(&format!("a{c}b"), Lines::One), format!("a{shown}b"));
        }
    }

    #[test]
    fn other_text_is_untouched_and_borrowed() {
        let text =
            "Ünïcødé 日本語 emoji 🦀, combining e\u{301}, zero width joiner 👩\u{200d}💻, \\x1b";
        assert!(matches!(escape(text, Lines::One), Cow::Borrowed(t) if t == text));
        assert!(matches!(flatten(text), Cow::Borrowed(_)));
        assert!(matches!(Printing::Escaped.json(text), Cow::Borrowed(_)));
        // Multi-byte text around an escape keeps its bytes.
        assert_eq!(escape("日\u{202e}本", Lines::One), "日\\u{202e}本");
    }

    #[test]
    fn newline_and_tab_are_kept_in_many_lines_and_escaped_in_one() {
        let text = "col\tcol\nnext\r\nlast";
        assert_eq!(escape(text, Lines::Many), "col\tcol\nnext\\r\nlast");
        assert_eq!(escape(text, Lines::One), "col\\tcol\\nnext\\r\\nlast");
        assert_eq!(Printing::Escaped.field(text), "col\\tcol\\nnext\\r\\nlast");
        assert_eq!(Printing::Escaped.line("a\tb\rc"), "a\tb\\rc");
        assert_eq!(Printing::Escaped.text(text), "col\tcol\nnext\\r\nlast");
    }

    #[test]
    fn piped_fields_flatten_controls_and_raw_keeps_every_byte() {
        let text = "a\tb\x1b[2J\u{202e}c\n";
        assert_eq!(Printing::Piped.field(text), "a b [2J\u{202e}c ");
        assert_eq!(Printing::Piped.line(text), "a b [2J\u{202e}c ");
        assert_eq!(Printing::Piped.text(text), text);
        assert_eq!(Printing::Raw.field(text), text);
        assert_eq!(Printing::Raw.line(text), text);
        assert_eq!(Printing::Raw.text(text), text);
        assert_eq!(Printing::Raw.json(text), text);
    }

    #[test]
    fn json_on_a_terminal_escapes_what_serializers_leave_and_decodes_the_same() {
        let value = serde_json::json!({"text": "a\x1b[2J\u{9b}\x7f\u{202e}b ü"});
        let doc = value.to_string();
        let shown = Printing::Escaped.json(&doc);
        assert_eq!(
            shown, "{\"text\":\"a\\u001b[2J\\u009b\\u007f\\u202eb ü\"}",
            "{doc}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).expect("still JSON");
        assert_eq!(back, value);
        assert_eq!(Printing::Piped.json(&doc), doc);
    }
}
