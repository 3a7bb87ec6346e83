//! Number and name formatting shared by the views.

use std::borrow::Cow;

use throng_metrics::Measurements;

/// The most characters a name (step, group, check, threshold, tag) takes
/// in a report; longer ones are cut with an ellipsis.
pub const NAME_CHARS: usize = 60;

/// The most characters a side's label takes in a comparison.
pub const LABEL_CHARS: usize = 40;

/// `s` cut to at most `max` characters, on a character boundary, ending in
/// `…` when cut. Text tables pad to widths taken from names, and a width
/// past 65,535 panics in `format!`: every data-derived width comes from
/// clipped names.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let keep = s.char_indices().nth(max.saturating_sub(1)).map_or(s.len(), |(i, _)| i);
            Cow::Owned(format!("{}…", &s[..keep]))
        }
    }
}

/// [`clip`] to [`NAME_CHARS`].
pub fn name(s: &str) -> Cow<'_, str> {
    clip(s, NAME_CHARS)
}

/// Characters in `s` (what `{:<width$}` pads by).
pub fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A duration in µs for people: `850µs`, `12.34ms`, `1.23s`.
pub fn us(v: f64) -> String {
    if v < 1000.0 {
        format!("{v:.0}µs")
    } else if v < 1_000_000.0 {
        format!("{:.2}ms", v / 1000.0)
    } else {
        format!("{:.2}s", v / 1_000_000.0)
    }
}

/// Bytes for people: `512 B`, `12.3 kB`, `4.56 MB`, `1.20 GB` (SI, as k6).
pub fn bytes(v: f64) -> String {
    if v < 1000.0 {
        format!("{v:.0} B")
    } else if v < 1e6 {
        format!("{:.1} kB", v / 1e3)
    } else if v < 1e9 {
        format!("{:.2} MB", v / 1e6)
    } else {
        format!("{:.2} GB", v / 1e9)
    }
}

/// Σ `values`, saturating: counts read from a file can be anything, and a
/// report never panics on them (a loaded result's own totals are checked to
/// fit when it is read).
pub fn total(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0u64, u64::saturating_add)
}

/// `part` as a percentage of `whole` (0 when whole is 0).
pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The phase whose distribution the latency charts show.
pub(crate) fn primary_phase(m: &Measurements) -> Option<&'static str> {
    ["latency", "response", "tls", "handshake", "connect", "connection"]
        .into_iter()
        .find(|p| m.phase(p).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(us(850.0), "850µs");
        assert_eq!(us(12_345.0), "12.35ms");
        assert_eq!(us(1_234_567.0), "1.23s");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(4_560_000.0), "4.56 MB");
        assert_eq!(pct(1, 4), 25.0);
        assert_eq!(pct(1, 0), 0.0);
    }

    #[test]
    fn clip_cuts_on_a_char_boundary_with_an_ellipsis() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("exactly10!", 10), "exactly10!");
        assert_eq!(clip("eleven char", 10), "eleven ch…");
        let long = "é".repeat(70_000);
        let cut = clip(&long, NAME_CHARS);
        assert_eq!(chars(&cut), NAME_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(clip("ab", 0), "…");
    }
}
