//! Execution segments: one process's exact share of a plan that several
//! processes (agents) run together.
//!
//! ```text
//!  --segment 1/4:1/2 --segment-sequence 0,1/4,1/2,3/4,1
//!        │ parse (exact fractions, no floats)
//!        ▼
//!  Segment ── cycle of L = lcm(denominators) indices; each index of the
//!             cycle belongs to exactly one segment of the sequence
//!        ├─ share(n): how many of the indices 0..n this segment owns
//!        └─ nth(m):   the global index of this segment's m-th one
//! ```
//!
//! As in k6, index `i` of anything countable (connection, request, arrival,
//! VU, iteration) belongs to the segment owning `i mod L`. The positions
//! of the cycle are dealt out by Tijdeman's rule (earliest deadline among
//! the segments not too far ahead of their share), so
//! each segment's indices are spread evenly: at any prefix `0..n` a segment
//! owns within one of `n × width`, and the segments' shares of any count add
//! up to it exactly. N agents that each follow their owned subsequence of
//! the single-host schedule together follow that schedule.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;

/// Longest cycle a sequence may need (the lcm of its denominators).
pub const MAX_CYCLE: u64 = 1 << 20;

/// An exact fraction in `[0, 1]`, reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fraction {
    num: u64,
    den: u64,
}

impl Fraction {
    /// 0.
    pub const ZERO: Fraction = Fraction { num: 0, den: 1 };
    /// 1.
    pub const ONE: Fraction = Fraction { num: 1, den: 1 };

    /// `num/den`, reduced; None when `den` is 0 or the value is above 1.
    pub fn new(num: u64, den: u64) -> Option<Fraction> {
        if den == 0 || num > den {
            return None;
        }
        let g = gcd(num, den);
        Some(Fraction {
            num: num / g,
            den: den / g,
        })
    }

    /// Numerator.
    pub fn numer(self) -> u64 {
        self.num
    }

    /// Denominator.
    pub fn denom(self) -> u64 {
        self.den
    }

    /// Parses `a/b`, a decimal (`0.25`) or a percentage (`25%`, `12.5%`,
    /// `100/3%`).
    pub fn parse(s: &str) -> Option<Fraction> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            let (n, d) = parse_ratio(p)?;
            return Fraction::new(n, d.checked_mul(100)?);
        }
        let (n, d) = parse_ratio(s)?;
        Fraction::new(n, d)
    }
}

/// `a/b` or a decimal as (numerator, denominator), unreduced.
fn parse_ratio(s: &str) -> Option<(u64, u64)> {
    if let Some((a, b)) = s.split_once('/') {
        let (an, ad) = parse_decimal(a)?;
        let (bn, bd) = parse_decimal(b)?;
        // (an/ad) / (bn/bd)
        let n = u128::from(an) * u128::from(bd);
        let d = u128::from(ad) * u128::from(bn);
        let g = gcd128(n, d);
        if d == 0 {
            return None;
        }
        return Some((u64::try_from(n / g).ok()?, u64::try_from(d / g).ok()?));
    }
    parse_decimal(s)
}

/// `12`, `0.25`, `.5` as (numerator, power-of-ten denominator).
fn parse_decimal(s: &str) -> Option<(u64, u64)> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || !(int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())) {
        return None;
    }
    if frac.len() > 12 {
        return None;
    }
    let den = 10u64.pow(frac.len() as u32);
    let int: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    Some((int.checked_mul(den)?.checked_add(frac)?, den))
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

impl PartialOrd for Fraction {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Fraction {
    fn cmp(&self, other: &Self) -> Ordering {
        (u128::from(self.num) * u128::from(other.den)).cmp(&(u128::from(other.num) * u128::from(self.den)))
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

fn gcd128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// One segment of a sequence, with the cycle positions it owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    sequence: Arc<[Fraction]>,
    /// This segment is `sequence[index]..sequence[index + 1]`.
    index: usize,
    /// Length of the striping cycle.
    cycle: u64,
    /// Positions of the cycle this segment owns, ascending.
    offsets: Arc<[u64]>,
}

impl Segment {
    /// The whole plan: `0:1` of `0,1`.
    pub fn whole() -> Segment {
        Segment {
            sequence: Arc::from([Fraction::ZERO, Fraction::ONE]),
            index: 0,
            cycle: 1,
            offsets: Arc::from([0u64]),
        }
    }

    /// Parses `--segment` (`FROM:TO`, or `TO` for `0:TO`) and
    /// `--segment-sequence` (a comma list starting at 0 and ending at 1;
    /// default `0,FROM,TO,1`).
    pub fn parse(segment: &str, sequence: Option<&str>) -> Result<Segment, PlanError> {
        let bad = |what: &str| {
            PlanError::invalid(
                "--segment",
                format!(
                    "'{segment}' {what}; give FROM:TO with fractions, decimals or percentages in [0, 1], \
                     e.g. --segment 1/4:1/2 (or 1/4 for 0:1/4)"
                ),
            )
        };
        let (from, to) = match segment.split_once(':') {
            Some((a, b)) => (a, b),
            None => ("0", segment),
        };
        let from = Fraction::parse(from).ok_or_else(|| bad("is not a segment"))?;
        let to = Fraction::parse(to).ok_or_else(|| bad("is not a segment"))?;
        if from >= to {
            return Err(bad("is empty (FROM must be below TO)"));
        }
        let points: Vec<Fraction> = match sequence {
            Some(seq) => seq
                .split(',')
                .map(|p| {
                    Fraction::parse(p).ok_or_else(|| {
                        PlanError::invalid(
                            "--segment-sequence",
                            format!(
                                "'{}' in '{seq}' is not a fraction in [0, 1]; e.g. 0,1/4,1/2,3/4,1",
                                p.trim()
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            None => {
                let mut v = vec![Fraction::ZERO, from, to, Fraction::ONE];
                v.dedup();
                v
            }
        };
        let seq_text = sequence.unwrap_or_default();
        if points.first() != Some(&Fraction::ZERO) || points.last() != Some(&Fraction::ONE) {
            return Err(PlanError::invalid(
                "--segment-sequence",
                format!("'{seq_text}' must start at 0 and end at 1, e.g. 0,1/3,2/3,1"),
            ));
        }
        if points.windows(2).any(|w| w[0] >= w[1]) {
            return Err(PlanError::invalid(
                "--segment-sequence",
                format!("'{seq_text}' must increase strictly, e.g. 0,1/3,2/3,1"),
            ));
        }
        let index = points
            .windows(2)
            .position(|w| w[0] == from && w[1] == to)
            .ok_or_else(|| {
                PlanError::invalid(
                    "--segment",
                    format!(
                        "{from}:{to} is not one of the segments of --segment-sequence {}; give two consecutive \
                         points of the sequence",
                        join(&points)
                    ),
                )
            })?;
        Segment::of(Arc::from(points), index)
    }

    /// Segment `index` of an already checked sequence.
    fn of(sequence: Arc<[Fraction]>, index: usize) -> Result<Segment, PlanError> {
        let mut cycle = 1u64;
        for p in sequence.iter() {
            cycle = cycle / gcd(cycle, p.den) * p.den;
            if cycle > MAX_CYCLE {
                return Err(PlanError::invalid(
                    "--segment-sequence",
                    format!(
                        "{} needs a cycle of more than {MAX_CYCLE} indices (the lcm of its denominators); \
                         use simpler fractions, e.g. 0,1/3,2/3,1",
                        join(&sequence)
                    ),
                ));
            }
        }
        let offsets = stripe_all(&sequence, cycle).swap_remove(index);
        Ok(Segment {
            sequence,
            index,
            cycle,
            offsets: Arc::from(offsets),
        })
    }

    /// Every segment of this one's sequence, in order.
    pub fn siblings(&self) -> Vec<Segment> {
        stripe_all(&self.sequence, self.cycle)
            .into_iter()
            .enumerate()
            .map(|(index, offsets)| Segment {
                sequence: Arc::clone(&self.sequence),
                index,
                cycle: self.cycle,
                offsets: Arc::from(offsets),
            })
            .collect()
    }

    /// True for `0:1` (the plan runs whole).
    pub fn is_whole(&self) -> bool {
        self.sequence.len() == 2
    }

    /// Start of the segment.
    pub fn from(&self) -> Fraction {
        self.sequence[self.index]
    }

    /// End of the segment.
    pub fn to(&self) -> Fraction {
        self.sequence[self.index + 1]
    }

    /// The sequence's points.
    pub fn sequence(&self) -> &[Fraction] {
        &self.sequence
    }

    /// This segment's place in the sequence, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Segments in the sequence.
    pub fn count(&self) -> usize {
        self.sequence.len() - 1
    }

    /// `1/4:1/2`.
    pub fn range(&self) -> String {
        format!("{}:{}", self.from(), self.to())
    }

    /// The width as a float, for pacing only (rates); counts use [`Segment::share`].
    pub fn width(&self) -> f64 {
        self.offsets.len() as f64 / self.cycle as f64
    }

    /// How many of the indices `0..n` this segment owns. Over the segments
    /// of a sequence these add up to `n` exactly.
    pub fn share(&self, n: u64) -> u64 {
        let w = self.offsets.len() as u64;
        let below = self.offsets.partition_point(|&o| o < n % self.cycle) as u64;
        (n / self.cycle) * w + below
    }

    /// The global index of this segment's `m`-th index (from 0).
    pub fn nth(&self, m: u64) -> u64 {
        let w = self.offsets.len() as u64;
        (m / w) * self.cycle + self.offsets[(m % w) as usize]
    }

    /// True when global index `i` is this segment's.
    pub fn owns(&self, i: u64) -> bool {
        self.offsets.binary_search(&(i % self.cycle)).is_ok()
    }
}

/// Deals the `cycle` positions to the sequence's segments and returns each
/// segment's positions, ascending.
///
/// Tijdeman's rule for the chairman assignment problem: at step `t`, among
/// the segments not ahead of their exact share `t × width` by more than
/// `1 - 1/(2(S-1))`, the one whose next deadline comes first takes the
/// position. Every prefix then differs from its exact share by less than 1
/// for every segment (Tijdeman 1980), so the agents' union tracks the
/// single-host schedule index by index.
fn stripe_all(sequence: &[Fraction], cycle: u64) -> Vec<Vec<u64>> {
    // Each segment's number of positions: its width × cycle (exact).
    let weights: Vec<u64> = sequence
        .windows(2)
        .map(|w| w[1].num * (cycle / w[1].den) - w[0].num * (cycle / w[0].den))
        .collect();
    let mut owned: Vec<Vec<u64>> = weights.iter().map(|&w| Vec::with_capacity(w as usize)).collect();
    let live = weights.iter().filter(|&&w| w > 0).count() as u128;
    if live <= 1 {
        if let Some(j) = weights.iter().position(|&w| w > 0) {
            owned[j] = (0..cycle).collect();
        }
        return owned;
    }
    // With m = 2(S-1): eligible when (t·w - k·L)·m ≥ L; deadline
    // (k·m + m - 1) / w, the smallest first, ties to the earlier segment.
    let m = 2 * (live - 1);
    let l = u128::from(cycle);
    let mut counts = vec![0u64; weights.len()];
    for pos in 0..cycle {
        let t = u128::from(pos) + 1;
        let mut best: Option<(usize, u128, u128)> = None;
        for (j, &w) in weights.iter().enumerate() {
            let (w, k) = (u128::from(w), u128::from(counts[j]));
            if w == 0 || k == w || (t * w).saturating_sub(k * l) * m < l {
                continue;
            }
            let num = k * m + m - 1;
            if best.is_none_or(|(_, bn, bw)| num * bw < bn * w) {
                best = Some((j, num, w));
            }
        }
        // Invariant: Tijdeman's theorem guarantees an eligible segment; the
        // fallback (any segment with positions left) only guards the loop.
        let j = best
            .map(|b| b.0)
            .or_else(|| (0..weights.len()).find(|&j| counts[j] < weights[j]))
            .unwrap_or(0);
        counts[j] += 1;
        owned[j].push(pos);
    }
    owned
}

fn join(points: &[Fraction]) -> String {
    points.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

impl fmt::Display for Segment {
    /// `1/4:1/2 of 0,1/4,1/2,3/4,1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {}", self.range(), join(&self.sequence))
    }
}

/// The form a segment takes in result files.
#[derive(Serialize, Deserialize)]
struct SegmentRecord {
    from: String,
    to: String,
    sequence: Vec<String>,
}

impl Serialize for Segment {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SegmentRecord {
            from: self.from().to_string(),
            to: self.to().to_string(),
            sequence: self.sequence.iter().map(ToString::to_string).collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Segment {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Segment, D::Error> {
        let r = SegmentRecord::deserialize(d)?;
        Segment::parse(&format!("{}:{}", r.from, r.to), Some(&r.sequence.join(","))).map_err(serde::de::Error::custom)
    }
}

/// Parses `--start-at`: unix milliseconds (`1795341600000`) or an RFC 3339
/// time (`2026-11-22T10:00:00Z`, `2026-11-22T11:00:00.5+01:00`), as ms since
/// the Unix epoch.
pub fn parse_start_at(s: &str) -> Result<u64, PlanError> {
    let bad = || {
        PlanError::invalid(
            "--start-at",
            format!("'{s}' is not a time; give RFC 3339 (2026-11-22T10:00:00Z) or unix milliseconds"),
        )
    };
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| bad());
    }
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<i64, PlanError> {
        let t = s.get(r).ok_or_else(bad)?;
        if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        t.parse().map_err(|_| bad())
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = s.get(start..i).ok_or_else(bad)?;
        if frac.is_empty() {
            return Err(bad());
        }
        let three: String = frac.chars().chain("000".chars()).take(3).collect();
        ms = three.parse().map_err(|_| bad())?;
    }
    let offset_min = match s.get(i..).ok_or_else(bad)? {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && (tz.starts_with('+') || tz.starts_with('-')) && &tz[3..4] == ":" => {
            let m = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if tz.starts_with('-') { -m } else { m }
        }
        _ => return Err(bad()),
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    u64::try_from(secs * 1000 + ms).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn f(s: &str) -> Fraction {
        Fraction::parse(s).expect("fraction")
    }

    #[test]
    fn parses_fractions_decimals_and_percentages() {
        assert_eq!(f("1/4"), Fraction::new(1, 4).expect("ok"));
        assert_eq!(f("0.25"), f("1/4"));
        assert_eq!(f("25%"), f("1/4"));
        assert_eq!(f("12.5%"), f("1/8"));
        assert_eq!(f("2/6").to_string(), "1/3");
        assert_eq!(f("1").to_string(), "1");
        assert!(Fraction::parse("5/4").is_none());
        assert!(Fraction::parse("x").is_none());
        assert!(Fraction::parse("1/0").is_none());
    }

    #[test]
    fn segment_forms() {
        let s = Segment::parse("1/4", None).expect("ok");
        assert_eq!(s.to_string(), "0:1/4 of 0,1/4,1");
        let s = Segment::parse("25%:50%", Some("0,1/4,1/2,3/4,1")).expect("ok");
        assert_eq!(s.to_string(), "1/4:1/2 of 0,1/4,1/2,3/4,1");
        assert_eq!(s.index(), 1);
        assert!(Segment::parse("0:1", None).expect("ok").is_whole());
        assert!(Segment::parse("1/3:1/2", Some("0,1/4,1/2,1")).is_err());
        assert!(Segment::parse("1/2:1/4", None).is_err());
        assert!(Segment::parse("0:1/2", Some("0,1/2")).is_err());
        assert!(Segment::parse("0:1/2", Some("0,1/2,1/2,1")).is_err());
    }

    #[test]
    fn start_at_forms() {
        assert_eq!(parse_start_at("1795341600000"), Ok(1_795_341_600_000));
        assert_eq!(parse_start_at("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_start_at("2026-11-22T10:00:00Z"), Ok(1_795_341_600_000));
        assert_eq!(parse_start_at("2026-11-22T11:00:00.25+01:00"), Ok(1_795_341_600_250));
        assert!(parse_start_at("2026-11-22 10:00").is_err());
        assert!(parse_start_at("tomorrow").is_err());
    }

    #[test]
    fn serde_round_trip() {
        let s = Segment::parse("1/4:1/2", Some("0,1/4,1/2,3/4,1")).expect("ok");
        let json = serde_json::to_string(&s).expect("json");
        assert_eq!(
            json,
            r#"{"from":"1/4","to":"1/2","sequence":["0","1/4","1/2","3/4","1"]}"#
        );
        let back: Segment = serde_json::from_str(&json).expect("back");
        assert_eq!(back, s);
    }

    #[test]
    fn thirds_stripe_evenly() {
        let s = Segment::parse("0:1/3", Some("0,1/3,2/3,1")).expect("ok");
        let shares: Vec<u64> = s.siblings().iter().map(|s| s.share(10)).collect();
        assert_eq!(shares, vec![4, 3, 3]);
        let owned: Vec<u64> = (0..4).map(|m| s.nth(m)).collect();
        assert_eq!(owned, vec![0, 3, 6, 9]);
    }

    /// A random sequence from 0 to 1: cut points as fractions of one
    /// denominator.
    fn sequence() -> impl Strategy<Value = Vec<Fraction>> {
        (1u64..=60, proptest::collection::vec(0u64..1000, 0..8)).prop_map(|(den, cuts)| {
            let mut nums: Vec<u64> = cuts.into_iter().map(|c| c % (den + 1)).collect();
            nums.extend([0, den]);
            nums.sort_unstable();
            nums.dedup();
            nums.into_iter().filter_map(|n| Fraction::new(n, den)).collect()
        })
    }

    fn segments(points: &[Fraction]) -> Vec<Segment> {
        let seq = join(points);
        let first = Segment::parse(&format!("{}:{}", points[0], points[1]), Some(&seq)).expect("valid");
        first.siblings()
    }

    proptest! {
        /// Every index below n belongs to exactly one segment; shares add
        /// up to n; nth enumerates exactly the owned indices, ascending.
        #[test]
        fn segments_partition_indices(points in sequence(), n in 0u64..3000) {
            let segs = segments(&points);
            let mut owner = vec![usize::MAX; n as usize];
            for (j, s) in segs.iter().enumerate() {
                let share = s.share(n);
                for m in 0..share {
                    let i = s.nth(m);
                    prop_assert!(i < n);
                    prop_assert!(s.owns(i));
                    prop_assert_eq!(owner[i as usize], usize::MAX, "index {} owned twice", i);
                    owner[i as usize] = j;
                    if m > 0 { prop_assert!(s.nth(m - 1) < i); }
                }
                prop_assert!(share == 0 || s.nth(share) >= n);
            }
            prop_assert!(owner.iter().all(|&o| o != usize::MAX), "an index has no segment");
            prop_assert_eq!(segs.iter().map(|s| s.share(n)).sum::<u64>(), n);
        }

        /// Striping is even: at every prefix a segment owns within one
        /// (plus rounding) of its exact share.
        #[test]
        fn shares_follow_width(points in sequence(), n in 0u64..3000) {
            for s in segments(&points) {
                let exact = n as f64 * s.width();
                prop_assert!((s.share(n) as f64 - exact).abs() < 1.0 + 1e-9,
                    "{}: {} of {} vs {}", s, s.share(n), n, exact);
            }
        }
    }
}
