//! Limits on the files a user hands throng (scenario and sweep YAML),
//! checked on the text before a parser sees it, and plain words for the
//! parsers' type names.
//!
//! A YAML parser given `[[[[…` 200 KB deep spends minutes before its own
//! recursion limit; a 50 MB file costs gigabytes. Both are refused here, in
//! time linear in the text.

/// Largest scenario or sweep file read, in bytes (4 MiB): far above any
/// hand-written plan, small enough to parse at once.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Deepest nesting of mappings and sequences (block or flow) a scenario or
/// sweep file may have.
pub const MAX_NESTING: usize = 64;

/// Where and why a file's text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong and what to do.
    pub message: String,
}

/// The text without a leading UTF-8 byte order mark (some Windows editors
/// write one; YAML allows it, the parser does not skip it).
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Refuses YAML text nested deeper than [`MAX_NESTING`]: flow brackets
/// (`[`, `{`) outside quotes and comments, plus block levels (each deeper
/// indentation, each `- ` that opens a sequence item). It may count a level
/// too many in odd text (a bracket in a plain scalar), never one too few.
pub fn check_yaml_nesting(text: &str) -> Result<(), InputError> {
    let mut flow = 0usize;
    // Indentations of the open block levels, innermost last.
    let mut blocks: Vec<usize> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let mut chars = body.char_indices().peekable();
        if flow == 0 && !body.is_empty() && !body.starts_with('#') {
            while blocks.last().is_some_and(|&b| b >= indent) {
                blocks.pop();
            }
            blocks.push(indent);
            // `- - - x`: each dash opens one more level on this line.
            let mut at = indent;
            while let Some(&(i, '-')) = chars.peek() {
                if !matches!(body.as_bytes().get(i + 1), Some(b' ') | None) {
                    break;
                }
                chars.next();
                while chars.next_if(|&(_, c)| c == ' ').is_some() {}
                at = indent + chars.peek().map_or(body.len(), |&(j, _)| j);
                blocks.push(at);
                check(blocks.len(), n, at)?;
            }
            check(blocks.len(), n, at)?;
        }
        let mut quote: Option<char> = None;
        let mut previous = ' ';
        while let Some((i, c)) = chars.next() {
            match (quote, c) {
                (Some('"'), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') if previous == ' ' || "[{,:".contains(previous) => quote = Some(c),
                (None, '#') if previous == ' ' || previous == '\t' => break,
                (None, '[' | '{') => {
                    flow += 1;
                    check(blocks.len() + flow, n, indent + i)?;
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            previous = c;
        }
    }
    Ok(())
}

fn check(depth: usize, line: usize, column: usize) -> Result<(), InputError> {
    if depth > MAX_NESTING {
        return Err(InputError {
            line: line + 1,
            column: column + 1,
            message: format!(
                "nested more than {MAX_NESTING} levels deep; a scenario or sweep needs a few (flatten the file)"
            ),
        });
    }
    Ok(())
}

/// A parser's message with Rust's type names in plain words: `expected
/// f64` becomes `expected a number`, `u64` and its kin `a whole number (0
/// or more)`, `i64` and its kin `a whole number`, `a boolean` `true or
/// false`.
pub fn plain_types(message: &str) -> String {
    const UNSIGNED: [&str; 6] = ["u8", "u16", "u32", "u64", "u128", "usize"];
    const SIGNED: [&str; 6] = ["i8", "i16", "i32", "i64", "i128", "isize"];
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (head, tail) = rest.split_at(at + "expected ".len());
        out.push_str(head);
        let word_len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let word = &tail[..word_len];
        let plain = match word {
            "f32" | "f64" => Some("a number"),
            w if UNSIGNED.contains(&w) => Some("a whole number (0 or more)"),
            w if SIGNED.contains(&w) => Some("a whole number"),
            "a" if tail.starts_with("a boolean") => {
                rest = &tail["a boolean".len()..];
                out.push_str("true or false");
                continue;
            }
            _ => None,
        };
        match plain {
            Some(p) => {
                out.push_str(p);
                rest = &tail[word_len..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_and_block_nesting_is_refused_with_its_place() {
        let deep = "[".repeat(200_000);
        let e = check_yaml_nesting(&format!("a: {deep}")).unwrap_err();
        assert_eq!((e.line, e.column), (1, 4 + MAX_NESTING - 1), "{e:?}");
        let mut block = String::new();
        for i in 0..100 {
            block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        let e = check_yaml_nesting(&block).unwrap_err();
        assert_eq!(e.line, MAX_NESTING + 1, "{e:?}");
        let dashes = format!("{}x\n", "- ".repeat(100));
        assert!(check_yaml_nesting(&dashes).is_err());
    }

    #[test]
    fn ordinary_files_pass() {
        let ok = "# a [ comment\nscenarios:\n  a:\n    flow:\n      - request: {url: '/x[', method: \"GET]\"}\n      \
                  - think: 1s # ]]]\n    body: |\n      {\"a\": [1, 2]}\n";
        check_yaml_nesting(ok).unwrap();
        let nested = format!("{}1{}", "[".repeat(MAX_NESTING - 1), "]".repeat(MAX_NESTING - 1));
        check_yaml_nesting(&format!("a: {nested}")).unwrap();
    }

    #[test]
    fn bom_is_stripped() {
        assert_eq!(strip_bom("\u{feff}a: 1"), "a: 1");
        assert_eq!(strip_bom("a: 1"), "a: 1");
    }

    #[test]
    fn type_names_read_as_words() {
        assert_eq!(
            plain_types("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            plain_types("invalid value: integer `-1`, expected u64 at x"),
            "invalid value: integer `-1`, expected a whole number (0 or more) at x"
        );
        assert_eq!(
            plain_types("invalid type: string \"y\", expected a boolean"),
            "invalid type: string \"y\", expected true or false"
        );
        assert_eq!(plain_types("expected a sequence"), "expected a sequence");
        assert_eq!(
            plain_types("expected u64s, expected i32"),
            "expected u64s, expected a whole number"
        );
    }
}
