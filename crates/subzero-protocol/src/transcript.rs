//! The digest of a transcript path, as a checkpoint names it (`expectedDigest`, a stored
//! leaf's digest): the one definition both the worker, which writes transcripts, and the
//! broker, which verifies them before a resume, compute.

use sha2::{Digest, Sha256};

/// One transcript entry as the digest reads it: its parent's id and its line.
pub type PathEntry<'a> = (Option<&'a str>, &'a str);

/// The SHA-256 (`sha256:<hex>`) of `prefix`, then of each line of the path from its root to
/// `leaf`, each line ending in exactly one newline. `entry(id)` gives an entry's parent and
/// line (with or without its newline). `None` when an id on the path is unknown, the path is
/// longer than `entries` (a loop), or `root` is given and the path does not start there.
pub fn path_digest<'a>(
    leaf: &'a str,
    root: Option<&str>,
    prefix: &str,
    entries: usize,
    entry: impl Fn(&str) -> Option<PathEntry<'a>>,
) -> Option<String> {
    let mut path = Vec::new();
    let mut cursor = Some(leaf);
    let mut first = leaf;
    while let Some(id) = cursor {
        let (parent, line) = entry(id)?;
        path.push(line);
        if path.len() > entries {
            return None;
        }
        first = id;
        cursor = parent;
    }
    if root.is_some_and(|root| root != first) {
        return None;
    }
    let mut hasher = Sha256::new();
    hasher.update(prefix.as_bytes());
    for line in path.iter().rev() {
        hasher.update(line.strip_suffix('\n').unwrap_or(line).as_bytes());
        hasher.update(b"\n");
    }
    Some(format!("sha256:{}", hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lines() -> HashMap<&'static str, PathEntry<'static>> {
        HashMap::from([
            ("a", (None, "{\"id\":\"a\"}\n")),
            ("b", (Some("a"), "{\"id\":\"b\"}")),
            ("c", (Some("b"), "{\"id\":\"c\"}\n")),
            ("x", (Some("y"), "x")),
            ("y", (Some("x"), "y")),
        ])
    }

    #[test]
    fn a_path_is_its_lines_from_the_root_each_with_one_newline() {
        let lines = lines();
        let got = path_digest("c", Some("a"), "", lines.len(), |id| lines.get(id).copied());
        let want = format!(
            "sha256:{}",
            hex::encode(Sha256::digest(
                b"{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n"
            ))
        );
        assert_eq!(got, Some(want));
        let prefixed = path_digest("a", None, "header\n", lines.len(), |id| {
            lines.get(id).copied()
        });
        let want = format!(
            "sha256:{}",
            hex::encode(Sha256::digest(b"header\n{\"id\":\"a\"}\n"))
        );
        assert_eq!(prefixed, Some(want));
    }

    #[test]
    fn a_broken_path_has_no_digest() {
        let lines = lines();
        let get = |id: &str| lines.get(id).copied();
        assert_eq!(
            path_digest("z", None, "", lines.len(), get),
            None,
            "unknown leaf"
        );
        assert_eq!(path_digest("x", None, "", lines.len(), get), None, "a loop");
        assert_eq!(
            path_digest("c", Some("b"), "", lines.len(), get),
            None,
            "another root"
        );
    }
}
