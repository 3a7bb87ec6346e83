//! Sets of HTTP status codes: which responses a plan counts as `ok`.

use serde::{Deserialize, Serialize};

/// A set of status codes 100–599, tested with one bit lookup per response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusSet {
    bits: [u64; 10],
}

impl Default for StatusSet {
    /// 200–399: what k6 and browsers count as success.
    fn default() -> Self {
        let mut s = StatusSet { bits: [0; 10] };
        s.insert_range(200, 399);
        s
    }
}

impl StatusSet {
    fn insert_range(&mut self, lo: u16, hi: u16) {
        for code in lo..=hi {
            let i = usize::from(code);
            self.bits[i / 64] |= 1 << (i % 64);
        }
    }

    /// Exactly these codes (gRPC status codes, 0–16, are kept here too);
    /// codes past 639 are left out.
    pub fn from_codes(codes: &[u16]) -> StatusSet {
        let mut s = StatusSet { bits: [0; 10] };
        for &c in codes.iter().filter(|&&c| c < 640) {
            s.insert_range(c, c);
        }
        s
    }

    /// True when `code` is in the set.
    #[inline]
    pub fn contains(&self, code: u16) -> bool {
        let i = usize::from(code);
        self.bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Parses `200`, `200-299`, `2xx`, and comma-separated lists of them.
    /// Any text gives a set or an error: numbers are checked against
    /// 100–599 before any arithmetic, so none can overflow.
    pub fn parse(text: &str) -> Result<StatusSet, StatusError> {
        let mut s = StatusSet { bits: [0; 10] };
        for part in text.split(',').map(str::trim) {
            let (lo, hi) = parse_part(part)?;
            s.insert_range(lo, hi);
        }
        Ok(s)
    }

    /// The set as text, compressed into ranges: `200-399`.
    pub fn to_text(&self) -> String {
        let mut parts = Vec::new();
        let mut code = 100u16;
        while code <= 599 {
            if self.contains(code) {
                let start = code;
                while code < 599 && self.contains(code + 1) {
                    code += 1;
                }
                parts.push(if start == code {
                    start.to_string()
                } else {
                    format!("{start}-{code}")
                });
            }
            code += 1;
        }
        parts.join(",")
    }
}

/// One item of a list: a status, `LO-HI` or a class `Nxx`, as the
/// lowest and highest status it holds.
fn parse_part(part: &str) -> Result<(u16, u16), StatusError> {
    if part.is_empty() {
        return Err(StatusError::Empty);
    }
    if let Some(class) = part.strip_suffix("xx").or_else(|| part.strip_suffix("XX")) {
        // A class is one digit, 1 to 5: 7xx, 700xx and 99999xx are not.
        let d = status_number(class, part).map_err(|_| StatusError::Class(shown(part)))?;
        if !(1..=5).contains(&d) {
            return Err(StatusError::Class(shown(part)));
        }
        return Ok((d * 100, d * 100 + 99));
    }
    let (lo, hi) = match part.split_once('-') {
        Some((a, b)) => (status_number(a.trim(), part)?, status_number(b.trim(), part)?),
        None => {
            let c = status_number(part, part)?;
            (c, c)
        }
    };
    if !(100..=599).contains(&lo) || !(100..=599).contains(&hi) || lo > hi {
        return Err(StatusError::OutOfRange(shown(part)));
    }
    Ok((lo, hi))
}

/// `text` (a piece of `part`) as a number: one past u16 is out of range,
/// anything but digits is malformed.
fn status_number(text: &str, part: &str) -> Result<u16, StatusError> {
    match text.parse::<u16>() {
        Ok(n) => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(StatusError::OutOfRange(shown(part))),
        Err(_) => Err(StatusError::Malformed(shown(part))),
    }
}

/// An item as an error quotes it: at most 40 characters, then `…`.
fn shown(part: &str) -> String {
    const MAX: usize = 40;
    match part.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &part[..end]),
        None => part.to_string(),
    }
}

/// Why one part of a status list is not a status, range or class (the
/// part as given, cut at 40 characters).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// Not a number, `LO-HI` or `Nxx`.
    #[error("'{0}' is not a status, range or class; use e.g. 200, 200-299, 2xx or 200,401")]
    Malformed(String),
    /// Outside 100-599, or a range from high to low.
    #[error("'{0}': statuses run from 100 to 599, low to high")]
    OutOfRange(String),
    /// `Nxx` with N not one digit from 1 to 5.
    #[error("'{0}' is not a status class: statuses run from 100 to 599, so classes from 1xx to 5xx")]
    Class(String),
    /// An empty item: two commas in a row, one at an end, or no text.
    #[error("an item of the list is empty (two commas in a row, or one at an end); use e.g. 200,401 or 2xx")]
    Empty,
}

impl Serialize for StatusSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_text())
    }
}

impl<'de> Deserialize<'de> for StatusSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        StatusSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let s = StatusSet::parse("2xx, 401, 500-502").unwrap();
        assert!(s.contains(200) && s.contains(299) && s.contains(401) && s.contains(501));
        assert!(!s.contains(300) && !s.contains(503) && !s.contains(0) && !s.contains(9999));
        assert_eq!(s.to_text(), "200-299,401,500-502");
        assert_eq!(StatusSet::default().to_text(), "200-399");
        assert!(StatusSet::parse("600").is_err());
        assert_eq!(
            StatusSet::parse("200, abc").unwrap_err().to_string(),
            "'abc' is not a status, range or class; use e.g. 200, 200-299, 2xx or 200,401"
        );
        assert_eq!(
            StatusSet::parse("300-200").unwrap_err().to_string(),
            "'300-200': statuses run from 100 to 599, low to high"
        );
        assert!(StatusSet::parse("300-200").is_err());
    }

    #[test]
    fn hostile_lists_are_errors_that_say_why() {
        let out_of_range = |part: &str| format!("'{part}': statuses run from 100 to 599, low to high");
        // Classes past 5xx: 700 * 100 overflowed a u16 (a panic in debug builds).
        for part in [
            "700xx", "999xx", "655xx", "6xx", "0xx", "99999xx", "1000xx", "7XX", "xx", "-2xx", "+-2xx", "2xx-3xx",
            "½xx",
        ] {
            assert_eq!(
                StatusSet::parse(part).unwrap_err().to_string(),
                format!("'{part}' is not a status class: statuses run from 100 to 599, so classes from 1xx to 5xx"),
                "{part}"
            );
        }
        for part in [
            "65536",
            "70000",
            "99999999999999999999",
            "600",
            "99",
            "65535-65536",
            "1-65536",
        ] {
            assert_eq!(
                StatusSet::parse(part).unwrap_err().to_string(),
                out_of_range(part),
                "{part}"
            );
        }
        for part in ["9xx99", "2x", "-", "-200", "200-", "2 00", "+-1", "2xx-300"] {
            assert_eq!(
                StatusSet::parse(part).unwrap_err(),
                StatusError::Malformed(part.to_string()),
                "{part}"
            );
        }
        let empty = "an item of the list is empty (two commas in a row, or one at an end); use e.g. 200,401 or 2xx";
        for text in ["", " ", ",", "200,", ",200", "200,,300", "2xx, ,401"] {
            assert_eq!(StatusSet::parse(text).unwrap_err().to_string(), empty, "{text:?}");
        }
        // 70,000 characters: an error, quoting at most 40 of them.
        for long in [
            "9".repeat(70_000),
            "a".repeat(70_000),
            format!("{}xx", "7".repeat(70_000)),
        ] {
            let e = StatusSet::parse(&long).unwrap_err().to_string();
            assert!(e.len() < 160, "{e}");
            assert!(e.contains(&format!("'{}…'", &long[..40])), "{e}");
        }
        // What was valid stays valid.
        let s = StatusSet::parse("1xx,5XX, 404 ,+200").unwrap();
        assert_eq!(s.to_text(), "100-200,404,500-599");
    }

    proptest::proptest! {
        /// Any text gives a set inside 100–599 or an error; never a panic.
        #[test]
        fn any_text_parses_or_errs(text in "[0-9xX, +-]{0,12}|\\PC{0,40}") {
            if let Ok(s) = StatusSet::parse(&text) {
                for code in (0..100).chain(600..2000) {
                    proptest::prop_assert!(!s.contains(code), "{text:?} holds {code}");
                }
            }
        }
    }
}
