//! The clients' side of the run: a seeded random source, arrival times along a curve, the
//! node weights of sticky routing, and session ids.

use crate::args::Curve;

/// SplitMix64: small, fast, and good enough for a workload (not for tickets). Seeded, so a
/// run is reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        // The multiply-shift reduction; its bias is far below what a simulation can see.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `ms` with +-20 % jitter (at least 1 ms): clients' timers drift apart, as real ones do.
    pub fn jitter(&mut self, ms: u64) -> u64 {
        self.spread(ms, 0.2)
    }

    /// `ms` times 1 +- `f`, uniformly (at least 1). (With 0.2, the very numbers `jitter`
    /// gave before it took this form: 1 - 0.2 and 2 x 0.2 are 0.8 and 0.4 exactly.)
    pub fn spread(&mut self, ms: u64, f: f64) -> u64 {
        ((ms as f64 * ((1.0 - f) + 2.0 * f * self.f64())).round() as u64).max(1)
    }
}

/// SplitMix64's finaliser: a bijection of u64 that maps only 0 to 0.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Client `i`'s session id: random-looking (nodes hash them), unique (a bijection of i + 1),
/// never 0 (0 marks an empty slot in the node's tables).
pub fn sid(i: usize) -> u64 {
    mix(i as u64 + 1)
}

/// The inverse of the curve's cumulative distribution over [0, 1]: the fraction of the arrival
/// period by which a fraction `u` of the clients has arrived.
pub fn curve_at(curve: Curve, u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    match curve {
        Curve::Flat => u,
        // Rate ∝ t: F(t) = t², so t = √u.
        Curve::Ramp => u.sqrt(),
        // 70 % over [0, 0.05), 30 % over [0.05, 1].
        Curve::Spike => {
            if u < 0.7 {
                0.05 * u / 0.7
            } else {
                0.05 + 0.95 * (u - 0.7) / 0.3
            }
        }
    }
}

/// Arrival offsets (ms from the start) of `n` clients over `period_ms`, sorted: client `i`
/// takes a random point of the i-th of n equal slices of the distribution, so the order of
/// indices is the order of arrival (the simulator counts true positions by index).
pub fn arrivals(n: usize, period_ms: u64, curve: Curve, rng: &mut Rng) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let u = (i as f64 + rng.f64()) / n as f64;
            (curve_at(curve, u) * period_ms as f64).floor() as u64
        })
        .collect()
}

/// Per-node weights from group weights (see `--weights` in the help): one per node when there
/// are as many, else consecutive groups as even as possible, a group's weight shared by its
/// nodes. Empty: all equal.
pub fn node_weights(nodes: usize, groups: &[f64]) -> Vec<f64> {
    if groups.is_empty() {
        return vec![1.0; nodes];
    }
    let g = groups.len();
    let mut out = Vec::with_capacity(nodes);
    for (k, &w) in groups.iter().enumerate() {
        // The first `nodes % g` groups take one node more.
        let size = nodes / g + usize::from(k < nodes % g);
        out.extend(std::iter::repeat_n(w / size as f64, size));
    }
    out
}

/// Picks an index by weight, from the cumulative weights.
pub struct Picker(Vec<f64>);

impl Picker {
    pub fn new(weights: &[f64]) -> Picker {
        let mut sum = 0.0;
        Picker(
            weights
                .iter()
                .map(|w| {
                    sum += w;
                    sum
                })
                .collect(),
        )
    }

    pub fn pick(&self, rng: &mut Rng) -> usize {
        let total = self.0.last().copied().unwrap_or(0.0);
        let x = rng.f64() * total;
        self.0
            .iter()
            .position(|&c| x < c)
            .unwrap_or(self.0.len().saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sids_are_unique_and_never_zero() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..100_000 {
            let s = sid(i);
            assert_ne!(s, 0);
            assert!(seen.insert(s));
        }
    }

    #[test]
    fn arrivals_are_sorted_and_follow_the_curve() {
        let mut rng = Rng::new(3);
        for curve in [Curve::Flat, Curve::Ramp, Curve::Spike] {
            let a = arrivals(100_000, 60_000, curve, &mut rng);
            assert!(a.windows(2).all(|w| w[0] <= w[1]));
            assert!(*a.last().unwrap() < 60_000);
            let first_half = a.iter().filter(|&&t| t < 30_000).count() as f64 / 1e5;
            let first_3s = a.iter().filter(|&&t| t < 3_000).count() as f64 / 1e5;
            match curve {
                Curve::Flat => assert!((first_half - 0.5).abs() < 0.01),
                // ∫0..½ of 2t dt = ¼.
                Curve::Ramp => assert!((first_half - 0.25).abs() < 0.01),
                Curve::Spike => assert!((first_3s - 0.7).abs() < 0.01),
            }
        }
    }

    #[test]
    fn group_weights_spread_over_nodes() {
        let w = node_weights(10, &[60.0, 30.0, 10.0]);
        assert_eq!(w.len(), 10);
        assert_eq!(&w[..4], &[15.0; 4]);
        assert_eq!(&w[4..7], &[10.0; 3]);
        assert!((w[7] - 10.0 / 3.0).abs() < 1e-9);
        assert!((w.iter().sum::<f64>() - 100.0).abs() < 1e-9);
        assert_eq!(node_weights(3, &[60.0, 30.0, 10.0]), vec![60.0, 30.0, 10.0]);
        assert_eq!(node_weights(2, &[]), vec![1.0, 1.0]);
    }

    #[test]
    fn the_picker_follows_the_weights() {
        let p = Picker::new(&[60.0, 30.0, 10.0, 0.0]);
        let mut rng = Rng::new(9);
        let mut n = [0u32; 4];
        for _ in 0..100_000 {
            n[p.pick(&mut rng)] += 1;
        }
        assert!((n[0] as i64 - 60_000).abs() < 1000, "{n:?}");
        assert!((n[1] as i64 - 30_000).abs() < 1000, "{n:?}");
        assert_eq!(n[3], 0);
    }

    #[test]
    fn jitter_stays_within_a_fifth() {
        let mut rng = Rng::new(1);
        for _ in 0..10_000 {
            let j = rng.jitter(10_000);
            assert!((8000..=12_000).contains(&j));
        }
        assert!(rng.below(10) < 10);
    }
}
