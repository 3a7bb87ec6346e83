//! The execution-segment sequence of N equal agents, written as exact
//! fractions: `0,1/4,1/2,3/4,1`, and agent `i` runs `i/N:(i+1)/N`.

/// `num/den` in lowest terms: `0` and `1` for the ends, `1/2` for `2/4`.
fn fraction(num: u32, den: u32) -> String {
    if num == 0 {
        return "0".to_string();
    }
    let g = gcd(num, den);
    let (n, d) = (num / g, den / g);
    if d == 1 { n.to_string() } else { format!("{n}/{d}") }
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The sequence `0,1/N,…,1` for `--segment-sequence` (`n` ≥ 1).
pub fn sequence(n: u32) -> String {
    (0..=n).map(|i| fraction(i, n)).collect::<Vec<_>>().join(",")
}

/// Each agent's `--segment FROM:TO`, by index.
pub fn segments(n: u32) -> Vec<String> {
    (0..n)
        .map(|i| format!("{}:{}", fraction(i, n), fraction(i + 1, n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_reduced_and_exact() {
        assert_eq!(sequence(1), "0,1");
        assert_eq!(sequence(4), "0,1/4,1/2,3/4,1");
        assert_eq!(sequence(6), "0,1/6,1/3,1/2,2/3,5/6,1");
        assert_eq!(segments(4), ["0:1/4", "1/4:1/2", "1/2:3/4", "3/4:1"]);
        assert_eq!(segments(1), ["0:1"]);
    }

    #[test]
    fn segments_tile_the_sequence() {
        for n in 1..=60 {
            let seq: Vec<String> = sequence(n).split(',').map(str::to_string).collect();
            let segs = segments(n);
            assert_eq!(segs.len() as u32, n);
            for (i, s) in segs.iter().enumerate() {
                assert_eq!(*s, format!("{}:{}", seq[i], seq[i + 1]), "n={n} i={i}");
            }
            // Each bound is the exact value i/n.
            for (i, f) in seq.iter().enumerate() {
                let (num, den) = f.split_once('/').map_or_else(
                    || (f.parse::<u64>().unwrap(), 1),
                    |(a, b)| (a.parse().unwrap(), b.parse().unwrap()),
                );
                assert_eq!(num * u64::from(n), i as u64 * den, "n={n} {f}");
            }
        }
    }
}
