//! A small seeded PRNG (xoshiro256**, seeded through splitmix64).
//!
//! Loss and jitter must repeat from a seed so that a run can be reproduced
//! and the model can be unit-tested; the quality needed is statistical, not
//! cryptographic. Twenty lines beat a dependency here. Reference:
//! Blackman & Vigna, "Scrambled linear pseudorandom number generators" (2021).

/// xoshiro256** state. `Clone` on purpose: a test may fork a stream.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

/// splitmix64 step: turns any seed (even 0) into well-mixed state words.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        Rng {
            s: [
                splitmix64(&mut sm),
                splitmix64(&mut sm),
                splitmix64(&mut sm),
                splitmix64(&mut sm),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// Standard normal deviate (Box-Muller; one of the pair is discarded,
    /// which keeps the stream position independent of caching).
    pub fn normal(&mut self) -> f64 {
        // 1 - u is in (0, 1], so ln() is finite.
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_seeds_differ() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn uniform_and_normal_moments() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let (mut su, mut sn, mut sn2) = (0.0, 0.0, 0.0);
        for _ in 0..n {
            let u = r.next_f64();
            assert!((0.0..1.0).contains(&u));
            su += u;
            let z = r.normal();
            sn += z;
            sn2 += z * z;
        }
        let n = n as f64;
        // 5 standard errors: sd(U) = 0.289, sd(Z) = 1, sd(Z^2) = sqrt(2).
        assert!((su / n - 0.5).abs() < 5.0 * 0.289 / n.sqrt());
        assert!((sn / n).abs() < 5.0 / n.sqrt());
        assert!((sn2 / n - 1.0).abs() < 5.0 * 2f64.sqrt() / n.sqrt());
    }
}
