//! Plain-text tables: aligned columns with ANSI colors on a terminal, tab-separated
//! lines otherwise (so `cut -f` and `awk -F'\t'` work).

use std::io::{self, Write};

use crate::terminal_text::Printing;

/// How a cell is emphasized on a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// No emphasis.
    Plain,
    /// Good news.
    Green,
    /// Needs attention.
    Yellow,
    /// Broken.
    Red,
    /// Secondary information.
    Dim,
}

impl Tone {
    fn ansi(self) -> Option<&'static str> {
        match self {
            Tone::Plain => None,
            Tone::Green => Some("\x1b[32m"),
            Tone::Yellow => Some("\x1b[33m"),
            Tone::Red => Some("\x1b[31m"),
            Tone::Dim => Some("\x1b[2m"),
        }
    }
}

/// One cell: text and its tone.
#[derive(Clone, Debug)]
pub struct Cell {
    text: String,
    tone: Tone,
}

impl Cell {
    /// A cell with a tone.
    pub fn new(text: impl Into<String>, tone: Tone) -> Self {
        Cell {
            text: text.into(),
            tone,
        }
    }

    /// A plain cell.
    pub fn plain(text: impl Into<String>) -> Self {
        Cell::new(text, Tone::Plain)
    }
}

/// Paint `text` when `color` is on.
pub fn paint(text: &str, tone: Tone, color: bool) -> String {
    match tone.ansi() {
        Some(code) if color => format!("{code}{text}\x1b[0m"),
        _ => text.to_owned(),
    }
}

/// A table with a header row.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<(Vec<Cell>, Option<String>)>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: Vec<&'static str>) -> Self {
        Table {
            header,
            rows: Vec::new(),
        }
    }

    /// Append a row (missing cells print empty).
    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push((row, None));
    }

    /// Append a row with a note printed, indented, on the line below it (already
    /// painted by the caller).
    pub fn push_with_note(&mut self, row: Vec<Cell>, note: Option<String>) {
        self.rows.push((row, note));
    }

    /// Write the table: `aligned` gives padded columns under a header, otherwise
    /// tab-separated lines without one; `color` adds ANSI colors (aligned only). Each cell
    /// is a one-line field of `printing` (escaped on a terminal, so a cell can neither break
    /// the layout nor act on the terminal).
    pub fn write(
        &self,
        out: &mut dyn Write,
        aligned: bool,
        color: bool,
        printing: Printing,
    ) -> io::Result<()> {
        let notes: Vec<Option<&String>> = self.rows.iter().map(|(_, n)| n.as_ref()).collect();
        let rows: Vec<Vec<(String, Tone)>> = self
            .rows
            .iter()
            .map(|(row, _)| {
                (0..self.header.len())
                    .map(|i| {
                        row.get(i).map_or((String::new(), Tone::Plain), |c| {
                            (printing.field(&c.text).into_owned(), c.tone)
                        })
                    })
                    .collect()
            })
            .collect();
        if !aligned {
            for (row, note) in rows.iter().zip(&notes) {
                let line: Vec<&str> = row.iter().map(|(t, _)| t.as_str()).collect();
                writeln!(out, "{}", line.join("\t"))?;
                if let Some(note) = note {
                    writeln!(out, "\t{note}")?;
                }
            }
            return Ok(());
        }
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (w, (text, _)) in widths.iter_mut().zip(row) {
                *w = (*w).max(text.chars().count());
            }
        }
        let last = self.header.len().saturating_sub(1);
        let header: Vec<String> = self
            .header
            .iter()
            .enumerate()
            .map(|(i, h)| pad(h, widths[i], i == last))
            .collect();
        let header = header.join("  ");
        if color {
            writeln!(out, "\x1b[1m{header}\x1b[0m")?;
        } else {
            writeln!(out, "{header}")?;
        }
        for (row, note) in rows.iter().zip(&notes) {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, (text, tone))| paint(&pad(text, widths[i], i == last), *tone, color))
                .collect();
            writeln!(out, "{}", cells.join("  ").trim_end())?;
            if let Some(note) = note {
                writeln!(out, "      {note}")?;
            }
        }
        Ok(())
    }
}

fn pad(text: &str, width: usize, last: bool) -> String {
    if last {
        return text.to_owned();
    }
    let fill = width.saturating_sub(text.chars().count());
    format!("{text}{}", " ".repeat(fill))
}
