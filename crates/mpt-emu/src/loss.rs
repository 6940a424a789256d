//! Packet loss: independent (Bernoulli) errors and Gilbert-Elliott bursts.
//!
//! Both draw from a seeded [`Rng`] owned by the direction, so the same seed
//! and the same packet sequence lose the same packets. The Gilbert-Elliott
//! parameters use the classic meaning (Gilbert 1960, Elliott 1963), which
//! netem's `gemodel` spells as `p r 1-h 1-k`:
//!
//! * `p`: probability of moving Good -> Bad before a packet,
//! * `r`: probability of moving Bad -> Good before a packet,
//! * `h`: probability that a packet in the Bad state gets through,
//! * `k`: probability that a packet in the Good state gets through.
//!
//! With `h = 0, k = 1` (the defaults) every packet in Bad is lost and none in
//! Good, so loss bursts are geometric with mean length `1/r` and the long-run
//! loss rate is `p / (p + r)`. A packet is lost if the Bernoulli draw or the
//! Gilbert-Elliott chain says so.

use super::rng::Rng;

/// Gilbert-Elliott parameters; see the module docs for their meaning.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GeParams {
    pub p: f64,
    pub r: f64,
    pub h: f64,
    pub k: f64,
}

impl GeParams {
    /// Long-run fraction of packets lost.
    pub fn stationary_loss(&self) -> f64 {
        if self.p + self.r == 0.0 {
            // The chain never leaves Good.
            return 1.0 - self.k;
        }
        let bad = self.p / (self.p + self.r);
        bad * (1.0 - self.h) + (1.0 - bad) * (1.0 - self.k)
    }

    /// Parses "p,r[,h[,k]]"; `h` defaults to 0 and `k` to 1.
    pub fn parse(input: &str) -> Result<Self, String> {
        let parts: Vec<&str> = input.split(',').map(str::trim).collect();
        if !(2..=4).contains(&parts.len()) {
            return Err(format!(
                "invalid Gilbert-Elliott parameters {input:?}: expected p,r[,h[,k]] \
                 with probabilities in [0, 1], e.g. 0.01,0.3"
            ));
        }
        let mut vals = [0.0, 0.0, 0.0, 1.0];
        for (slot, part) in vals.iter_mut().zip(&parts) {
            *slot = super::units::parse_probability(part).map_err(|e| e.to_string())?;
        }
        Ok(GeParams {
            p: vals[0],
            r: vals[1],
            h: vals[2],
            k: vals[3],
        })
    }
}

/// What the loss stage is configured to do.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct LossConfig {
    /// Independent packet error rate.
    pub per: f64,
    pub gilbert_elliott: Option<GeParams>,
}

impl LossConfig {
    pub fn is_lossless(&self) -> bool {
        self.per == 0.0 && self.gilbert_elliott.is_none()
    }
}

/// The per-direction loss state machine.
#[derive(Debug, Clone)]
pub struct LossModel {
    cfg: LossConfig,
    rng: Rng,
    bad: bool,
}

impl LossModel {
    pub fn new(cfg: LossConfig, seed: u64) -> Self {
        LossModel {
            cfg,
            rng: Rng::new(seed),
            bad: false,
        }
    }

    /// Decides the fate of the next packet: true = lost.
    pub fn lose(&mut self) -> bool {
        let mut lost = false;
        if let Some(ge) = self.cfg.gilbert_elliott {
            let flip = if self.bad { ge.r } else { ge.p };
            if self.rng.chance(flip) {
                self.bad = !self.bad;
            }
            let pass = if self.bad { ge.h } else { ge.k };
            lost = !self.rng.chance(pass);
        }
        if self.cfg.per > 0.0 && self.rng.chance(self.cfg.per) {
            lost = true;
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal-approximation bound for a binomial count: z standard errors.
    fn within(count: usize, n: usize, p: f64, z: f64) -> bool {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        (count as f64 - mean).abs() <= z * sd
    }

    #[test]
    fn bernoulli_rate_matches_per() {
        for (seed, per) in [(1, 0.01), (2, 0.1), (3, 0.5)] {
            let mut m = LossModel::new(
                LossConfig {
                    per,
                    gilbert_elliott: None,
                },
                seed,
            );
            let n = 100_000;
            let lost = (0..n).filter(|_| m.lose()).count();
            assert!(within(lost, n, per, 4.0), "per {per}: lost {lost} of {n}");
        }
    }

    #[test]
    fn zero_loss_loses_nothing() {
        let mut m = LossModel::new(LossConfig::default(), 9);
        assert!((0..10_000).all(|_| !m.lose()));
    }

    #[test]
    fn same_seed_same_losses() {
        let cfg = LossConfig {
            per: 0.2,
            gilbert_elliott: GeParams::parse("0.05,0.4").ok(),
        };
        let mut a = LossModel::new(cfg, 42);
        let mut b = LossModel::new(cfg, 42);
        let va: Vec<bool> = (0..1000).map(|_| a.lose()).collect();
        let vb: Vec<bool> = (0..1000).map(|_| b.lose()).collect();
        assert_eq!(va, vb);
    }

    #[test]
    fn gilbert_elliott_bursts_and_rate() {
        let ge = GeParams {
            p: 0.02,
            r: 0.25,
            h: 0.0,
            k: 1.0,
        };
        let mut m = LossModel::new(
            LossConfig {
                per: 0.0,
                gilbert_elliott: Some(ge),
            },
            5,
        );
        let n = 400_000;
        let mut lost = 0usize;
        let mut bursts = Vec::new();
        let mut run = 0usize;
        for _ in 0..n {
            if m.lose() {
                lost += 1;
                run += 1;
            } else if run > 0 {
                bursts.push(run);
                run = 0;
            }
        }
        let rate = lost as f64 / n as f64;
        let expected = ge.stationary_loss();
        // Losses are correlated, so allow a generous 10 % relative band.
        assert!(
            (rate - expected).abs() < 0.1 * expected,
            "rate {rate} vs {expected}"
        );
        let mean_burst = bursts.iter().sum::<usize>() as f64 / bursts.len() as f64;
        // Geometric burst length, mean 1/r = 4, sd sqrt(1-r)/r ~ 3.5.
        let se = ((1.0 - ge.r).sqrt() / ge.r) / (bursts.len() as f64).sqrt();
        assert!(
            (mean_burst - 1.0 / ge.r).abs() < 5.0 * se,
            "mean burst {mean_burst}"
        );
    }

    #[test]
    fn parse_ge() {
        assert_eq!(
            GeParams::parse("0.1,0.5"),
            Ok(GeParams {
                p: 0.1,
                r: 0.5,
                h: 0.0,
                k: 1.0
            })
        );
        assert!(GeParams::parse("0.1").is_err());
        assert!(GeParams::parse("0.1,2").is_err());
        assert!(GeParams::parse("0.1,0.2,0.3,0.4,0.5").is_err());
    }
}
