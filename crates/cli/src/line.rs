//! One line of stderr kept readable whatever the user typed: an error
//! echoes the value it refuses, and a 70,000-character value would bury
//! the advice after it.

use std::borrow::Cow;

/// The longest run of non-blank characters kept whole.
const WORD: usize = 200;
/// The longest line kept whole; a longer one keeps its start and its end
/// (where the advice is).
const LINE: usize = 4000;

/// `line` with every run of non-blank characters over 200 cut to its first
/// 200 and a count of the rest, then, if still over 4,000 characters, its
/// first 2,500 and last 1,000 around a count of what was left out.
pub fn bounded(line: &str) -> Cow<'_, str> {
    let long_word = line.split(char::is_whitespace).any(|w| w.chars().count() > WORD);
    let mut out: Cow<'_, str> = if long_word {
        let mut s = String::new();
        let mut word = String::new();
        let flush = |word: &mut String, s: &mut String| {
            let n = word.chars().count();
            if n > WORD {
                s.extend(word.chars().take(WORD));
                s.push_str(&format!("…[{} more characters]", n - WORD));
            } else {
                s.push_str(word);
            }
            word.clear();
        };
        for c in line.chars() {
            if c.is_whitespace() {
                flush(&mut word, &mut s);
                s.push(c);
            } else {
                word.push(c);
            }
        }
        flush(&mut word, &mut s);
        Cow::Owned(s)
    } else {
        Cow::Borrowed(line)
    };
    let n = out.chars().count();
    if n > LINE {
        let head: String = out.chars().take(2500).collect();
        let tail: String = out.chars().skip(n - 1000).collect();
        out = Cow::Owned(format!("{head} …[{} characters left out]… {tail}", n - 3500));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::bounded;

    #[test]
    fn short_lines_pass_untouched() {
        let l = "throng: error: --rate: invalid rate 'x' (see 'throng http --help')";
        assert!(matches!(bounded(l), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn a_long_value_is_cut_and_the_advice_after_it_kept() {
        let l = format!(
            "error: invalid value '{}' for '--rate': use 100 (see help)",
            "é".repeat(70_000)
        );
        let b = bounded(&l);
        assert!(b.chars().count() < 400, "{b}");
        assert!(
            b.contains("69802 more characters") && b.ends_with("use 100 (see help)"),
            "{b}"
        );
        let spaced = format!("error: '{}' is not a rate; use 100", "ab ".repeat(30_000));
        let b = bounded(&spaced);
        assert!(b.chars().count() < 3600, "{}", b.len());
        assert!(b.contains("characters left out") && b.ends_with("is not a rate; use 100"));
    }
}
