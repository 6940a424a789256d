//! The stable fuzz harness: proptest's runner driven two ways.
//!
//! * As a test (`cargo test -p mpt-benches --test fuzz`, part of CI): each
//!   target runs its `cases` inputs from a fixed seed, so CI never flakes
//!   and a failure reproduces; the whole file stays well under 2 s.
//! * From `benches/fuzz.sh --seconds N` (`MPT_FUZZ_SECONDS=N`): each target
//!   runs batches from fresh seeds until its N seconds are up, printing
//!   the cases run and the seed of every batch (set `MPT_FUZZ_SEED` to
//!   replay one).
//!
//! Why proptest and not bolero: proptest is already the workspace's test
//! dependency (no new crate), its shrinking gives a minimal failing input,
//! and its strategies build the structured inputs (SYN packets with
//! options, JSON requests, config edits) that find more than raw bytes
//! would. Bolero's gain, coverage guidance, needs a nightly sanitizer
//! build; the cargo-fuzz targets in fuzz/ already cover that where a
//! nightly toolchain exists.

use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// How long each target runs in bench mode, if at all.
fn budget() -> Option<Duration> {
    let s: f64 = std::env::var("MPT_FUZZ_SECONDS").ok()?.parse().ok()?;
    (s > 0.0).then(|| Duration::from_secs_f64(s))
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&seed.wrapping_add(i as u64).to_le_bytes());
    }
    out
}

fn run_batch<S: Strategy>(
    name: &str,
    cases: u32,
    seed: u64,
    strategy: &S,
    test: &impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases,
        failure_persistence: None,
        // Shrinking a failure of a cheap target is quick; of a costly one
        // it is bounded.
        max_shrink_iters: 2048,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed));
    let mut runner = TestRunner::new_with_rng(config, rng);
    match runner.run(strategy, test) {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => {
            panic!("fuzz target {name} failed (seed {seed}): {why}\nminimal input: {input:#?}")
        }
        Err(TestError::Abort(why)) => panic!("fuzz target {name} aborted (seed {seed}): {why}"),
    }
}

/// Runs `test` on inputs from `strategy`: `cases` of them from a fixed
/// seed as a test, or for the bench's time budget (see the module docs).
/// Returns how many cases ran.
pub fn fuzz<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> u64
where
    S::Value: std::fmt::Debug,
{
    let fixed: Option<u64> = std::env::var("MPT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let Some(budget) = budget() else {
        run_batch(name, cases, fixed.unwrap_or(0x6d70_7466), &strategy, &test);
        return u64::from(cases);
    };
    let start = Instant::now();
    let mut seed = fixed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut total = 0u64;
    let mut batches = 0u64;
    while start.elapsed() < budget {
        run_batch(name, cases, seed, &strategy, &test);
        total += u64::from(cases);
        batches += 1;
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
    eprintln!(
        "fuzz {name}: {total} cases in {batches} batches, {:.1}s, no failure (last seed {seed})",
        start.elapsed().as_secs_f64()
    );
    total
}
