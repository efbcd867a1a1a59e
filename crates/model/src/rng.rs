//! A small, fast, seedable generator: xoshiro256++ seeded by SplitMix64.
//!
//! The simulator needs tens of millions of variates per second and bit-for-bit
//! repeatable runs from a seed on every platform; this generator gives both
//! without a dependency. It is not for cryptography.

/// xoshiro256++ (Blackman & Vigna, 2019).
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator from a seed; equal seeds give equal streams.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }

    /// Uniform in (0, 1]: never 0, so `ln` is always finite.
    #[inline]
    pub fn uniform_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given mean.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.uniform_open0().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeatable_and_uniform() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        // Mean of U(0,1]: 0.5 ± 4σ with σ = 1/sqrt(12 n).
        let n = 200_000;
        let m: f64 = (0..n).map(|_| a.uniform_open0()).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 4.0 / (12.0 * n as f64).sqrt(), "{m}");
        // Exponential mean 3: σ of the mean is 3/sqrt(n).
        let e: f64 = (0..n).map(|_| a.exp(3.0)).sum::<f64>() / n as f64;
        assert!((e - 3.0).abs() < 4.0 * 3.0 / (n as f64).sqrt(), "{e}");
    }
}
