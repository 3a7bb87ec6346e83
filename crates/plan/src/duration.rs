//! Durations and rates as people type them: `500ms`, `30s`, `2m`, `1m30s`, `1000/s`.

use std::time::Duration;

const UNITS: &str = "us, ms, s, m or h";

/// Parses `250ms`, `30s`, `1.5s`, `2m`, `1h`, `1m30s`, `100us`; a bare number
/// means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    // Errors quote the input: keep them one line whatever it holds.
    duration(text).map_err(|e| crate::error::one_line(&e).into_owned())
}

fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = |why: &str| {
        format!("invalid duration '{text}': {why}; expected a number with a unit ({UNITS}), e.g. 500ms, 30s, 2m, 1m30s")
    };
    if t.is_empty() {
        return Err(bad("it is empty"));
    }
    if let Ok(secs) = t.parse::<f64>() {
        return seconds(secs).ok_or_else(|| bad("it must be a finite, non-negative number"));
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad("a unit is missing"))?;
        if num_end == 0 {
            return Err(bad("a number is missing"));
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| bad("the number is malformed"))?;
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
            other => return Err(bad(&format!("unknown unit '{other}'"))),
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    seconds(total).ok_or_else(|| bad("it is too large"))
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
pub fn parse_rate(text: &str) -> Result<f64, String> {
    rate(text).map_err(|e| crate::error::one_line(&e).into_owned())
}

fn rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, per) = match t.split_once('/') {
        Some((n, "s")) => (n, 1.0),
        Some((n, "m")) => (n, 60.0),
        Some((n, "h")) => (n, 3600.0),
        Some((_, unit)) => {
            return Err(format!(
                "invalid rate '{text}': unknown unit '/{unit}'; use /s, /m or /h, e.g. 1000/s"
            ));
        }
        None => (t, 1.0),
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid rate '{text}': expected a number per second, e.g. 1000 or 1000/s"))?;
    let rate = value / per;
    if !rate.is_finite() || rate <= 0.0 {
        return Err(format!(
            "invalid rate '{text}': must be greater than 0, e.g. 1000 (requests per second)"
        ));
    }
    if rate > MAX_RATE {
        return Err(format!(
            "invalid rate '{text}': more than 100M per second is not a plan one machine can follow"
        ));
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

    #[test]
    fn rejects_with_an_example() {
        for bad in ["", "abc", "10x", "-1s", "s", "1.2.3s", "inf"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("e.g. 500ms"), "{bad}: {e}");
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
        assert!(parse_rate("0").unwrap_err().contains("greater than 0"));
        assert!(parse_rate("-5").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("5/d").unwrap_err().contains("/s"));
    }
}
