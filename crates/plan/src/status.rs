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
    pub fn parse(text: &str) -> Result<StatusSet, StatusError> {
        let mut s = StatusSet { bits: [0; 10] };
        let bad = |part: &str| StatusError::Malformed(part.to_string());
        for part in text.split(',').map(str::trim) {
            let (lo, hi) = if let Some(class) = part.strip_suffix("xx").or_else(|| part.strip_suffix("XX")) {
                let d: u16 = class.parse().map_err(|_| bad(part))?;
                (d * 100, d * 100 + 99)
            } else if let Some((a, b)) = part.split_once('-') {
                (
                    a.trim().parse().map_err(|_| bad(part))?,
                    b.trim().parse().map_err(|_| bad(part))?,
                )
            } else {
                let c: u16 = part.parse().map_err(|_| bad(part))?;
                (c, c)
            };
            if !(100..=599).contains(&lo) || !(100..=599).contains(&hi) || lo > hi {
                return Err(StatusError::OutOfRange(part.to_string()));
            }
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

/// Why one part of a status list is not a status, range or class (the
/// part as given).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// Not a number, `LO-HI` or `Nxx`.
    #[error("'{0}' is not a status, range or class; use e.g. 200, 200-299, 2xx or 200,401")]
    Malformed(String),
    /// Outside 100-599, or a range from high to low.
    #[error("'{0}': statuses run from 100 to 599, low to high")]
    OutOfRange(String),
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
}
