//! Number formatting shared by the views.

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

/// `part` as a percentage of `whole` (0 when whole is 0).
pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
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
}
