//! Durations and rates as people type them: `500ms`, `30s`, `2m`, `1m30s`, `1000/s`.

use std::time::Duration;

const UNITS: &str = "us, ms, s, m or h";

/// Parses `250ms`, `30s`, `1.5s`, `2m`, `1h`, `1m30s`, `100us`; a bare number
/// means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    duration(text).map_err(|fault| DurationError {
        text: text.to_string(),
        fault,
    })
}

/// Why a text is not a duration (`-d`, `--timeout`, a scenario's
/// durations). Its message quotes the text on one line (control
/// characters escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DurationError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub fault: DurationFault,
}

/// What is wrong with a duration's text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurationFault {
    /// Nothing but blanks.
    Empty,
    /// A bare number that is negative, infinite or not a number.
    OutOfRange,
    /// A number without a unit after it.
    MissingUnit,
    /// A unit without a number before it.
    MissingNumber,
    /// Digits and dots that are no number (`1..5s`).
    Malformed,
    /// A unit other than us, ms, s, m or h.
    UnknownUnit(String),
    /// The sum is more than the largest duration a plan holds.
    TooLarge,
}

impl std::fmt::Display for DurationFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DurationFault::Empty => f.write_str("it is empty"),
            DurationFault::OutOfRange => f.write_str("it must be a finite, non-negative number"),
            DurationFault::MissingUnit => f.write_str("a unit is missing"),
            DurationFault::MissingNumber => f.write_str("a number is missing"),
            DurationFault::Malformed => f.write_str("the number is malformed"),
            DurationFault::UnknownUnit(unit) => write!(f, "unknown unit '{unit}'"),
            DurationFault::TooLarge => f.write_str("it is too large"),
        }
    }
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Errors quote the input: keep them one line whatever it holds.
        let said = format!(
            "invalid duration '{}': {}; expected a number with a unit ({UNITS}), e.g. 500ms, 30s, 2m, 1m30s",
            self.text, self.fault
        );
        f.write_str(&crate::error::one_line(&said))
    }
}

impl std::error::Error for DurationError {}

fn duration(text: &str) -> Result<Duration, DurationFault> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationFault::Empty);
    }
    if let Ok(secs) = t.parse::<f64>() {
        return seconds(secs).ok_or(DurationFault::OutOfRange);
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(DurationFault::MissingUnit)?;
        if num_end == 0 {
            return Err(DurationFault::MissingNumber);
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| DurationFault::Malformed)?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(DurationFault::UnknownUnit(other.to_string())),
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    seconds(total).ok_or(DurationFault::TooLarge)
}

fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && (0.0..1e12).contains(&s)).then(|| Duration::from_secs_f64(s))
}

/// Formats a duration the way [`parse_duration`] reads it: `250ms`, `30s`,
/// `1m30s`, `1.5s`.
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        return "0s".to_string();
    }
    if us < 1000 {
        return format!("{us}us");
    }
    if us < 1_000_000 {
        return if us.is_multiple_of(1000) {
            format!("{}ms", us / 1000)
        } else {
            format!("{}ms", trim(us as f64 / 1000.0))
        };
    }
    if !us.is_multiple_of(1_000_000) {
        return format!("{}s", trim(d.as_secs_f64()));
    }
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// A rate (per second) as a person would write it: `100/s`, `2.5/s`,
/// `10/min` for `-r 10/m`, `3/h`; a rate under one a second that is no
/// whole number per minute or hour reads `0.167/s`. `what` goes before
/// the unit: `format_rate(0.5, "req")` is `30 req/min`.
pub fn format_rate(per_s: f64, what: &str) -> String {
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(" {what}")
    };
    let whole = |v: f64| v >= 1.0 && (v - v.round()).abs() < 1e-6 * v;
    if per_s < 1.0 {
        for (per, unit) in [(60.0, "min"), (3600.0, "h")] {
            let v = per_s * per;
            if whole(v) {
                return format!("{}{what}/{unit}", v.round());
            }
        }
        if per_s < 0.001 {
            return format!("{}{what}/h", trim(per_s * 3600.0));
        }
    }
    format!("{}{what}/s", trim(per_s))
}

/// `1 connection`, `2 connections`, `3 source addresses`: a count and its
/// noun, singular for one.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else if noun.ends_with('s') || noun.ends_with('x') {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The highest rate a plan may ask for, per second (`-r`, a scenario's
/// `rate`): above it no machine follows the schedule, and the engine would
/// spend its time counting the starts it drops.
pub const MAX_RATE: f64 = 1e8;

/// Parses a rate: `1000`, `1000/s`, `60/m`, `3600/h`, in events per second.
pub fn parse_rate(text: &str) -> Result<f64, RateError> {
    rate(text).map_err(|fault| RateError {
        text: text.to_string(),
        fault,
    })
}

/// Why a text is not a rate (`-r`, a scenario's `rate`). Its message
/// quotes the text on one line (control characters escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub fault: RateFault,
}

/// What is wrong with a rate's text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RateFault {
    /// A unit after `/` other than s, m or h.
    UnknownUnit(String),
    /// No number before the unit.
    NotANumber,
    /// Zero, negative or not finite.
    NotPositive,
    /// More than [`MAX_RATE`] per second.
    TooHigh,
}

impl std::fmt::Display for RateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = &self.text;
        // Errors quote the input: keep them one line whatever it holds.
        let said = match &self.fault {
            RateFault::UnknownUnit(unit) => {
                format!("invalid rate '{text}': unknown unit '/{unit}'; use /s, /m or /h, e.g. 1000/s")
            }
            RateFault::NotANumber => {
                format!("invalid rate '{text}': expected a number per second, e.g. 1000 or 1000/s")
            }
            RateFault::NotPositive => {
                format!("invalid rate '{text}': must be greater than 0, e.g. 1000 (requests per second)")
            }
            RateFault::TooHigh => {
                format!("invalid rate '{text}': more than 100M per second is not a plan one machine can follow")
            }
        };
        f.write_str(&crate::error::one_line(&said))
    }
}

impl std::error::Error for RateError {}

fn rate(text: &str) -> Result<f64, RateFault> {
    let t = text.trim();
    let (num, per) = match t.split_once('/') {
        Some((n, "s")) => (n, 1.0),
        Some((n, "m")) => (n, 60.0),
        Some((n, "h")) => (n, 3600.0),
        Some((_, unit)) => return Err(RateFault::UnknownUnit(unit.to_string())),
        None => (t, 1.0),
    };
    let value: f64 = num.trim().parse().map_err(|_| RateFault::NotANumber)?;
    let rate = value / per;
    if !rate.is_finite() || rate <= 0.0 {
        return Err(RateFault::NotPositive);
    }
    if rate > MAX_RATE {
        return Err(RateFault::TooHigh);
    }
    Ok(rate)
}

/// Serde for durations as people type them (`"10s"`).
pub mod serde_duration {
    use std::time::Duration;

    use serde::Deserialize;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde for optional durations as people type them.
pub mod serde_opt_duration {
    use std::time::Duration;

    use serde::Deserialize;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::serde_duration::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| super::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn rates_read_as_typed() {
        let r = |t: &str| super::format_rate(super::parse_rate(t).unwrap(), "req");
        assert_eq!(r("10/m"), "10 req/min");
        assert_eq!(r("100"), "100 req/s");
        assert_eq!(r("2.5"), "2.5 req/s");
        assert_eq!(r("3/h"), "3 req/h");
        assert_eq!(r("7/h"), "7 req/h");
        assert_eq!(r("0.5"), "30 req/min");
        assert_eq!(r("0.1666"), "0.167 req/s");
        assert_eq!(super::format_rate(2000.0, ""), "2000/s");
        assert_eq!(super::format_rate(1.0 / 7200.0, ""), "0.5/h");
    }

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(super::count(1u32, "thread"), "1 thread");
        assert_eq!(super::count(0u64, "window"), "0 windows");
        assert_eq!(super::count(2u64, "connection"), "2 connections");
        assert_eq!(super::count(3u64, "source address"), "3 source addresses");
    }

    use super::*;

    #[test]
    fn parses_what_people_type() {
        let cases = [
            ("30s", 30_000),
            ("30", 30_000),
            ("1.5s", 1_500),
            ("250ms", 250),
            ("2m", 120_000),
            ("1m30s", 90_000),
            ("1h", 3_600_000),
            ("0", 0),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_duration(text).unwrap(), Duration::from_millis(ms), "{text}");
        }
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
    }

    /// The typed errors say what the strings said before them, byte for byte.
    #[test]
    fn errors_say_the_same_text() {
        let d = |t: &str| parse_duration(t).unwrap_err().to_string();
        let tail = "; expected a number with a unit (us, ms, s, m or h), e.g. 500ms, 30s, 2m, 1m30s";
        assert_eq!(d(" "), format!("invalid duration ' ': it is empty{tail}"));
        assert_eq!(
            d("-1"),
            format!("invalid duration '-1': it must be a finite, non-negative number{tail}")
        );
        assert_eq!(d("ms"), format!("invalid duration 'ms': a number is missing{tail}"));
        assert_eq!(
            d("1..5s"),
            format!("invalid duration '1..5s': the number is malformed{tail}")
        );
        assert_eq!(d("3x\n"), format!("invalid duration '3x\\n': unknown unit 'x'{tail}"));
        assert_eq!(
            d("3\u{1b}x"),
            format!("invalid duration '3\\u{{1b}}x': unknown unit '\\u{{1b}}x'{tail}")
        );
        assert_eq!(
            parse_duration("1\u{1b}s").unwrap_err().fault,
            DurationFault::UnknownUnit("\u{1b}s".into())
        );
        assert_eq!(
            d("99999999999999h"),
            format!("invalid duration '99999999999999h': it is too large{tail}")
        );
        let r = |t: &str| parse_rate(t).unwrap_err().to_string();
        assert_eq!(
            r("5/d"),
            "invalid rate '5/d': unknown unit '/d'; use /s, /m or /h, e.g. 1000/s"
        );
        assert_eq!(
            r("x\t"),
            "invalid rate 'x\\t': expected a number per second, e.g. 1000 or 1000/s"
        );
        assert_eq!(
            r("0"),
            "invalid rate '0': must be greater than 0, e.g. 1000 (requests per second)"
        );
        assert_eq!(
            r("1e9"),
            "invalid rate '1e9': more than 100M per second is not a plan one machine can follow"
        );
    }

    #[test]
    fn rejects_with_an_example() {
        for bad in ["", "abc", "10x", "-1s", "s", "1.2.3s", "inf"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.to_string().contains("e.g. 500ms"), "{bad}: {e}");
        }
    }

    #[test]
    fn format_round_trips() {
        for ms in [0, 1, 250, 1_500, 30_000, 90_000, 3_600_000, 3_690_000, 5_400_500] {
            let d = Duration::from_millis(ms);
            assert_eq!(
                parse_duration(&format_duration(d)).unwrap(),
                d,
                "{}",
                format_duration(d)
            );
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1000").unwrap(), 1000.0);
        assert_eq!(parse_rate("60/m").unwrap(), 1.0);
        assert_eq!(parse_rate("0.5").unwrap(), 0.5);
        assert!(parse_rate("0").unwrap_err().to_string().contains("greater than 0"));
        assert!(parse_rate("-5").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("5/d").unwrap_err().to_string().contains("/s"));
    }
}
