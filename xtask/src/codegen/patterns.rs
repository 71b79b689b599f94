//! The schemas' `pattern`s, checked in Rust with `regex_lite` instead of the ECMA-262 engine
//! (`regress`) typify emits: its Unicode tables were a quarter of the broker's relocated
//! data, written at every start. A pattern is rewritten where the two dialects differ
//! (`\s`, `.`), and one that uses what the lighter engine lacks fails the codegen, naming it.

use syn::visit_mut::VisitMut;

/// ECMA-262 `\s`: WhiteSpace and LineTerminator (regex_lite's `\s` is ASCII only).
const ECMA_SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// ECMA-262 `.`: anything but a LineTerminator (Rust's `.` stops only at `\n`).
const ECMA_DOT: &str = r"[^\n\r\x{2028}\x{2029}]";

/// Point typify's `::regress::Regex` at `::regex_lite::Regex` and translate each pattern it
/// compiles. Fails on a pattern regex_lite cannot check as ECMA-262 does.
pub fn use_regex_lite(file: &mut syn::File) -> Result<(), String> {
    let mut rewrite = Rewrite { error: None };
    rewrite.visit_file_mut(file);
    rewrite.error.map_or(Ok(()), Err)
}

struct Rewrite {
    error: Option<String>,
}

impl VisitMut for Rewrite {
    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        if let Some(first) = path.segments.first_mut()
            && first.ident == "regress"
        {
            first.ident = syn::Ident::new("regex_lite", first.ident.span());
        }
        syn::visit_mut::visit_path_mut(self, path);
    }

    fn visit_expr_call_mut(&mut self, call: &mut syn::ExprCall) {
        let compiles_a_regex = matches!(&*call.func, syn::Expr::Path(p)
            if p.path.segments.len() >= 2
                && p.path.segments.iter().rev().nth(1).is_some_and(|s| s.ident == "Regex")
                && p.path.segments.last().is_some_and(|s| s.ident == "new"));
        if compiles_a_regex
            && let Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(pattern),
                ..
            })) = call.args.first_mut()
        {
            match translate(&pattern.value()) {
                Ok(rust) => *pattern = syn::LitStr::new(&rust, pattern.span()),
                Err(e) => {
                    self.error
                        .get_or_insert(format!("pattern {:?}: {e}", pattern.value()));
                }
            }
        }
        syn::visit_mut::visit_expr_call_mut(self, call);
    }
}

/// An ECMA-262 pattern (as JSON Schema's `pattern` means it) as a regex_lite pattern that
/// matches the same strings; checked by compiling it.
pub fn translate(ecma: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = ecma.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars.next().ok_or("ends in a lone backslash")?;
                match (escaped, in_class) {
                    ('s', true) => out.push_str(ECMA_SPACE),
                    ('s', false) => out.push_str(&format!("[{ECMA_SPACE}]")),
                    ('S', false) => out.push_str(&format!("[^{ECMA_SPACE}]")),
                    ('S', true) => return Err("\\S inside a character class".to_string()),
                    ('p' | 'P', _) => return Err("Unicode property escapes".to_string()),
                    ('c', _) => return Err("control-character escapes (\\c)".to_string()),
                    (digit, _) if digit.is_ascii_digit() && digit != '0' => {
                        return Err("back-references".to_string());
                    }
                    // \d \w \b and their negations are ASCII in both dialects; the rest
                    // are escapes of one character, spelled alike.
                    (other, _) => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap_or('^'));
                }
                if chars.peek() == Some(&']') {
                    return Err("an empty character class".to_string());
                }
            }
            '[' => out.push_str(r"\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '.' if !in_class => out.push_str(ECMA_DOT),
            other => out.push(other),
        }
    }
    if in_class {
        return Err("an unclosed character class".to_string());
    }
    regex_lite::Regex::new(&out).map_err(|e| format!("not a pattern regex_lite reads: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn matches(ecma: &str, text: &str) -> bool {
        let rust = translate(ecma).unwrap();
        regex_lite::Regex::new(&rust).unwrap().is_match(text)
    }

    #[test]
    fn ecma_whitespace_is_whitespace_in_and_out_of_a_class() {
        for space in [
            " ", "\t", "\u{a0}", "\u{2003}", "\u{3000}", "\u{feff}", "\u{2028}",
        ] {
            assert!(matches(r"\s", space), "{space:?}");
            assert!(!matches(
                r"^https?://[^/\s?#]+$",
                &format!("http://a{space}b")
            ));
        }
        // Not ECMA whitespace, though Unicode calls U+0085 and U+180E spaces at times.
        assert!(!matches(r"\s", "\u{85}"));
        assert!(!matches(r"\s", "\u{180e}"));
        assert!(matches(r"^\S+$", "abc"));
        assert!(!matches(r"^\S+$", "a\u{2003}c"));
    }

    #[test]
    fn the_schemas_patterns_keep_their_meaning() {
        assert!(matches(r"^https?://[^/\s?#]+$", "http://127.0.0.1:8080"));
        assert!(!matches(r"^https?://[^/\s?#]+$", "http://host/path"));
        assert!(matches(r"^[A-Za-z0-9_.-]{1,64}$", "a.b-c_d"));
        assert!(!matches(r"^[A-Za-z0-9_.-]{1,64}$", "a/b"));
        assert!(matches(
            r"^ch_[0-9A-HJKMNP-TV-Z]{26}$",
            "ch_01ARZ3NDEKTSV4RRFFQ69G5FAV"
        ));
        assert!(!matches(
            r"^ch_[0-9A-HJKMNP-TV-Z]{26}$",
            "ch_01ARZ3NDEKTSV4RRFFQ69G5FAVX"
        ));
        // `$` is the end of the text, not of a line, in both dialects.
        assert!(!matches(r"^1$", "1\n"));
    }

    #[test]
    fn an_ecma_dot_stops_at_every_line_terminator() {
        assert!(matches(r"^.$", "x"));
        for terminator in ["\n", "\r", "\u{2028}", "\u{2029}"] {
            assert!(!matches(r"^.$", terminator), "{terminator:?}");
        }
        // Inside a class a dot is a dot.
        assert!(matches(r"^[.]$", "."));
        assert!(!matches(r"^[.]$", "x"));
    }

    #[test]
    fn what_regex_lite_cannot_check_alike_is_refused() {
        for pattern in [r"\p{L}", r"(a)\1", r"[\S]", r"(?=a)", r"[]", r"[a", r"\cJ"] {
            assert!(translate(pattern).is_err(), "{pattern}");
        }
    }

    #[test]
    fn typify_output_is_pointed_at_regex_lite() {
        let mut file: syn::File = syn::parse_quote! {
            fn check(value: &str) -> bool {
                static PATTERN: ::std::sync::LazyLock<::regress::Regex> =
                    ::std::sync::LazyLock::new(|| ::regress::Regex::new("^a\\sb$").unwrap());
                PATTERN.find(value).is_some()
            }
        };
        use_regex_lite(&mut file).unwrap();
        let text = quote::quote!(#file).to_string();
        assert!(!text.contains("regress"), "{text}");
        assert!(text.contains(":: regex_lite :: Regex :: new"), "{text}");
        assert!(text.contains(r"x{2000}"), "{text}");
    }
}
