//! SplitMix64 (Steele, Lea and Flood, 2014): a small, fast, seedable generator, for
//! deterministic data (the demo team, benchmark data, randomized tests) and for jitter.
//! Not for secrets: keys come from the OS's random source.
//!
//! ```
//! use usage_core::rng::SplitMix64;
//!
//! let mut a = SplitMix64::new(7);
//! let mut b = SplitMix64::new(7);
//! assert_eq!(a.next_u64(), b.next_u64());
//! assert!(a.below(10) < 10);
//! assert!((0.0..1.0).contains(&a.unit()));
//! ```

/// The increment of the generator's state: 2^64 over the golden ratio, odd.
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finalizer: a bijection of `u64` in which every input bit moves every
/// output bit. Distinct inputs give distinct outputs (request ids rely on it).
pub const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A number in `[0, 1)` from the 53 high bits of `x`.
pub fn unit_of(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The generator: the same seed gives the same sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        unit_of(self.next_u64())
    }

    /// A number below `n` (0 when `n` is 0), by remainder: the bias, at most `n / 2^64`,
    /// does not matter for test data.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An element of `xs` (which must not be empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() <= p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sequence() {
        // The first outputs for seed 0 of the reference implementation (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F
            ]
        );
    }

    #[test]
    fn draws_stay_in_their_bounds() {
        let mut r = SplitMix64::new(42);
        for n in [1, 2, 3, 10, 1 << 40] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
                let u = r.unit();
                assert!((0.0..1.0).contains(&u));
            }
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(*r.pick(&[5]), 5);
        assert!(!r.chance(-1.0));
        assert!(r.chance(1.0));
    }
}
