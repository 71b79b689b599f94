//! The code a linked binary is made of, read from LLD's map file (`-Map`): where each
//! function landed and the symbol a `--symbol-ordering-file` names it by. The map, not the
//! binary's symbol table: the shipped binary has none.
//!
//! Lines of LLD's map: `VMA LMA Size Align` in hex, then at three indentations an output
//! section (`.text`), an input section (`obj.o:(.text._ZN…E)`) or a symbol (demangled).
//! With function sections, each `.text.<symbol>` input section is one function; a plain
//! `(.text)` section (C start files, assembly) is named by the symbols listed in it.

/// One function of the code: `[start, start + size)` and its (mangled) symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub start: u64,
    pub size: u64,
    pub symbol: String,
}

/// The functions of `map`'s input code sections, sorted by address.
pub fn functions(map: &str) -> Vec<Function> {
    let mut out = Vec::new();
    // Inside a plain `(.text)` input section: its symbols name its functions.
    let mut plain_text = false;
    for line in map.lines() {
        let Some((start, size, name)) = entry(line) else {
            continue;
        };
        if let Some(section) = name.strip_suffix(')').and_then(|n| n.rsplit_once(":(")) {
            let section = section.1;
            plain_text = section == ".text";
            if let Some(symbol) = function_section_symbol(section) {
                out.push(Function {
                    start,
                    size,
                    symbol: symbol.to_owned(),
                });
            }
        } else if plain_text && size > 0 && is_plain_symbol(name) {
            out.push(Function {
                start,
                size,
                symbol: name.to_owned(),
            });
        } else if name.starts_with('.') && !line.contains(":(") {
            // An output section.
            plain_text = false;
        }
    }
    out.sort_by_key(|f| f.start);
    out
}

/// The function of `functions` (sorted, as [`functions`] returns them) that holds `address`.
pub fn function_at(functions: &[Function], address: u64) -> Option<&Function> {
    let index = functions.partition_point(|f| f.start <= address);
    let candidate = functions.get(index.checked_sub(1)?)?;
    (address < candidate.start + candidate.size).then_some(candidate)
}

/// `(VMA, size, rest of the line)` of a map line, `None` for the header.
fn entry(line: &str) -> Option<(u64, u64, &str)> {
    let mut rest = line;
    let mut numbers = [0u64; 4];
    for number in &mut numbers {
        let field = rest.trim_start();
        let end = field.find(char::is_whitespace)?;
        *number = u64::from_str_radix(&field[..end], 16).ok()?;
        rest = &field[end..];
    }
    // The name is everything after the four numbers (demangled symbols hold spaces).
    Some((numbers[0], numbers[2], rest.trim()))
}

/// The symbol a function section is named after: `.text.<symbol>`, or with the section
/// prefixes LLVM gives cold, hot and start-up functions.
fn function_section_symbol(section: &str) -> Option<&str> {
    let rest = section.strip_prefix(".text.")?;
    ["unlikely.", "hot.", "startup.", "exit.", "split."]
        .iter()
        .find_map(|prefix| rest.strip_prefix(prefix))
        .or(Some(rest))
        .filter(|symbol| !symbol.is_empty())
}

/// A symbol as the linker knows it (not a demangled Rust path).
fn is_plain_symbol(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_.$@".contains(&b))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const MAP: &str = "             VMA              LMA     Size Align Out     In      Symbol
          382380           382380   d5ca98    64 .text
          382380           382380       22    16         /usr/lib/x86_64-linux-gnu/Scrt1.o:(.text)
          382380           382380       22     1                 _start
          3823d0           3823d0       27    16         /t/subzero.cgu.2.rcgu.o:(.text.main)
          3823d0           3823d0       27     1                 main
          382400           382400      6a1    16         /t/std.cgu.0.rcgu.o:(.text._RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal)
          382400           382400      6a1     1                 std::rt::lang_start_internal
          384620           384620       67    16         /t/std.cgu.0.rcgu.o:(.text.unlikely._ZN5alloc7raw_vec8grow_one17h0123456789abcdefE)
          384620           384620       67     1                 <alloc::raw_vec::RawVec<alloc::vec::Vec<u8>>>::grow_one
         1126f88          1126f88       78     8         /t/subzero.cgu.2.rcgu.o:(.data.rel.ro._ZN7subzero5serve3run10__CALLSITE)
";

    #[test]
    fn each_function_section_and_plain_text_symbol_is_named_by_its_symbol() {
        let functions = functions(MAP);
        let symbols: Vec<(u64, u64, &str)> = functions
            .iter()
            .map(|f| (f.start, f.size, f.symbol.as_str()))
            .collect();
        assert_eq!(
            symbols,
            [
                (0x382380, 0x22, "_start"),
                (0x3823d0, 0x27, "main"),
                (
                    0x382400,
                    0x6a1,
                    "_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal"
                ),
                (
                    0x384620,
                    0x67,
                    "_ZN5alloc7raw_vec8grow_one17h0123456789abcdefE"
                ),
            ]
        );
    }

    #[test]
    fn an_address_names_the_function_that_holds_it() {
        let functions = functions(MAP);
        let at = |a| function_at(&functions, a).map(|f| f.symbol.as_str());
        assert_eq!(at(0x382380), Some("_start"));
        assert_eq!(at(0x3823f6), Some("main"));
        assert_eq!(at(0x3823f7), None);
        assert_eq!(at(0x100), None);
        assert_eq!(
            at(0x384686),
            Some("_ZN5alloc7raw_vec8grow_one17h0123456789abcdefE")
        );
    }
}
