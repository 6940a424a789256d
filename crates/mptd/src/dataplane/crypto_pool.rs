//! Crypto stage: a fixed pool of helper threads that seal and open
//! batches for every connection's workers.
//!
//! A receive or transmit worker that has a batch of AEAD work (one
//! `recvmmsg` of sealed datagrams, one tun read to seal) hands it to the
//! pool through its own [`Submitter`]: the batch is cut into a few chunks,
//! helpers are woken to take some of them, and the submitting worker takes
//! chunks itself until none are left, then waits for the chunks the
//! helpers took. So a busy connection's crypto runs on every core, while
//! the worker keeps everything that needs order (replay windows,
//! resequencing, sequence numbers, per-path GSO sends) serial, before and
//! after the parallel part, in the batch's original order: the pool only
//! fills in per-item results, it never reorders.
//!
//! Costs are per batch, never per packet: one lock to queue the batch (and
//! one to take back what no helper took), one atomic add per chunk
//! claimed, no allocation (each worker reuses its [`Submitter`] and item
//! buffers). Small batches are not worth a hand-off (waking a helper costs
//! more than opening a few datagrams): below two chunks of
//! [`CryptoPool::min_chunk`] items the submitter does the work inline.
//!
//! The pool's size does not depend on the number of connections: every
//! connection's workers submit to the same pool (issue #14, many clients on
//! one port, builds on this). Helpers are `threads - 1` (the submitter is
//! the other core's worth).
//!
//! Work is borrowed, not moved: [`Submitter::run`] does not return before
//! every helper is done with the batch (also when a chunk panics), which is
//! what makes lending the caller's buffers to other threads sound.

use crate::sync::lock_unpoisoned;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Items per chunk below which a batch is not split: 16 full-size
/// datagrams are about 10-20 µs of ChaCha20-Poly1305, the order of a
/// helper's wake-up (measured: docs/results/2026-11-25-per-packet-cost.md).
pub const DEFAULT_MIN_CHUNK: usize = 16;

/// How long an idle helper keeps looking for work before it sleeps: a
/// busy connection submits a batch every few tens of µs, and a sleeping
/// helper takes longer than that to wake.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// Chunks per taking part thread a large batch is cut into. More than one:
/// a helper descheduled in the middle of a chunk (other processes share
/// the cores) holds the batch up only for that chunk, since the submitter
/// claims whatever is left.
pub const CHUNKS_PER_THREAD: usize = 4;

/// Scratch bytes each thread gets for its chunks (the largest datagram).
const SCRATCH_LEN: usize = 65536;

/// The signature of a type-erased chunk runner: the work closure, the
/// items, the chunk's range, the thread's scratch buffer.
type ChunkFn = unsafe fn(*const (), *mut (), usize, usize, &mut Vec<u8>);

/// One batch as the helpers see it: where its items are and what to do
/// with them. Written by the submitter only while no helper can see it.
#[derive(Clone, Copy)]
struct Task {
    run: ChunkFn,
    op: *const (),
    data: *mut (),
    len: usize,
    chunk: usize,
    chunks: usize,
}

/// A submitter's batch slot, reused for every batch it submits.
struct Job {
    task: UnsafeCell<Task>,
    /// Next chunk to claim.
    next: AtomicUsize,
    /// Chunks finished.
    done: AtomicUsize,
    /// Helpers that took this job from the queue and have not let go.
    users: AtomicUsize,
}

// SAFETY: `task` is written only by the owning `Submitter` while no helper
// can reach the job (not queued, `users == 0`); helpers only read it. The
// raw pointers in it point at data `Submitter::run` borrows for as long as
// any helper may use them (see there), and that data is `Send`/`Sync` as
// `run`'s bounds require.
unsafe impl Send for Job {}
// SAFETY: as above.
unsafe impl Sync for Job {}

impl Job {
    /// Claims and runs chunks until none is left; returns how many it ran.
    fn help(&self, scratch: &mut Vec<u8>) -> u64 {
        let mut ran = 0;
        loop {
            let i = self.next.fetch_add(1, Ordering::Acquire);
            // SAFETY: the task is not written while this thread can claim
            // (it is the submitter itself, or a helper counted in `users`).
            let task = unsafe { *self.task.get() };
            if i >= task.chunks {
                return ran;
            }
            ran += 1;
            let start = i * task.chunk;
            let end = (start + task.chunk).min(task.len);
            // SAFETY: chunk `i` is claimed by this thread only (fetch_add),
            // the chunks are disjoint ranges of `len` items, and the items
            // and the closure outlive the batch (`Submitter::run` waits).
            let r = catch_unwind(AssertUnwindSafe(|| unsafe {
                (task.run)(task.op, task.data, start, end, scratch)
            }));
            if r.is_err() {
                tracing::error!(
                    chunk = i,
                    "crypto chunk panicked; its items are left unprocessed"
                );
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Runs `op` on items `start..end` of the slice at `data`.
///
/// # Safety
/// `op` must point at an `F` and `data` at `len >= end` items of `T`
/// (`start <= end`), both valid for the call, and no other thread may use
/// these items meanwhile.
unsafe fn run_chunk<T, F: Fn(&mut [T], &mut Vec<u8>)>(
    op: *const (),
    data: *mut (),
    start: usize,
    end: usize,
    scratch: &mut Vec<u8>,
) {
    // SAFETY: see the function's contract.
    unsafe {
        let op = &*op.cast::<F>();
        let items = std::slice::from_raw_parts_mut(data.cast::<T>().add(start), end - start);
        op(items, scratch);
    }
}

/// No-op chunk runner of an idle job.
unsafe fn run_nothing(_: *const (), _: *mut (), _: usize, _: usize, _: &mut Vec<u8>) {}

struct Queue {
    jobs: VecDeque<Arc<Job>>,
    sleepers: usize,
    shutdown: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Entries in `queue.jobs` (read without the lock by spinning helpers).
    queued: AtomicUsize,
    stop: AtomicBool,
    spin: Duration,
    /// Batches split into chunks, and chunks helpers ran (added once per
    /// batch; logged when the pool stops).
    split_batches: AtomicU64,
    helper_chunks: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        lock_unpoisoned(&self.queue)
    }

    fn helper(&self) {
        let mut scratch = Vec::with_capacity(SCRATCH_LEN);
        loop {
            // Look for work without the lock for a while before sleeping.
            if !self.spin.is_zero() && self.queued.load(Ordering::Relaxed) == 0 {
                let until = Instant::now() + self.spin;
                let mut polls = 0u32;
                while self.queued.load(Ordering::Relaxed) == 0 && !self.stop.load(Ordering::Relaxed)
                {
                    std::hint::spin_loop();
                    polls += 1;
                    if polls.is_multiple_of(64) && Instant::now() >= until {
                        break;
                    }
                }
            }
            let job = {
                let mut q = self.lock();
                loop {
                    if q.shutdown {
                        return;
                    }
                    if let Some(job) = q.jobs.pop_front() {
                        self.queued.fetch_sub(1, Ordering::Relaxed);
                        // Counted under the lock: a submitter that takes
                        // its entries back sees this helper.
                        job.users.fetch_add(1, Ordering::Relaxed);
                        break job;
                    }
                    q.sleepers += 1;
                    q = match self.wake.wait(q) {
                        Ok(g) => g,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    q.sleepers -= 1;
                }
            };
            let ran = job.help(&mut scratch);
            if ran > 0 {
                self.helper_chunks.fetch_add(ran, Ordering::Relaxed);
            }
            job.users.fetch_sub(1, Ordering::Release);
        }
    }
}

/// The crypto stage: helper threads shared by all connections.
pub struct CryptoPool {
    shared: Arc<Shared>,
    helpers: usize,
    min_chunk: usize,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for CryptoPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CryptoPool")
            .field("helpers", &self.helpers)
            .field("min_chunk", &self.min_chunk)
            .finish_non_exhaustive()
    }
}

impl CryptoPool {
    /// Starts `helpers` helper threads (0: every batch runs inline in its
    /// submitter). Batches are split in chunks of at least `min_chunk`
    /// items; idle helpers look for work for `spin` before they sleep.
    pub fn start(helpers: usize, min_chunk: usize, spin: Duration) -> std::io::Result<CryptoPool> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: VecDeque::with_capacity(64),
                sleepers: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            queued: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            spin,
            split_batches: AtomicU64::new(0),
            helper_chunks: AtomicU64::new(0),
        });
        let pool = CryptoPool {
            shared: shared.clone(),
            helpers,
            min_chunk: min_chunk.max(1),
            handles: Mutex::new(Vec::with_capacity(helpers)),
        };
        for i in 0..helpers {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("crypto{i}"))
                .spawn(move || s.helper())?;
            if let Ok(mut hs) = pool.handles.lock() {
                hs.push(h);
            }
        }
        Ok(pool)
    }

    /// Helper threads.
    pub fn helpers(&self) -> usize {
        self.helpers
    }

    /// Smallest chunk a batch is split into.
    pub fn min_chunk(&self) -> usize {
        self.min_chunk
    }

    /// A submission slot for one worker (allocated once per worker).
    pub fn submitter(self: &Arc<Self>) -> Submitter {
        Submitter {
            pool: self.clone(),
            job: Arc::new(Job {
                task: UnsafeCell::new(Task {
                    run: run_nothing,
                    op: std::ptr::null(),
                    data: std::ptr::null_mut(),
                    len: 0,
                    chunk: 1,
                    chunks: 0,
                }),
                next: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
                users: AtomicUsize::new(0),
            }),
            scratch: Vec::with_capacity(SCRATCH_LEN),
        }
    }

    /// Batches split so far, and chunks of them the helpers ran.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.shared.split_batches.load(Ordering::Relaxed),
            self.shared.helper_chunks.load(Ordering::Relaxed),
        )
    }

    /// Stops the helpers (after the workers that submit to them).
    pub fn stop(&self) {
        if self.shared.stop.swap(true, Ordering::Relaxed) {
            return;
        }
        let (split, by_helpers) = self.stats();
        tracing::info!(
            helpers = self.helpers,
            split_batches = split,
            helper_chunks = by_helpers,
            "crypto stage stopped"
        );
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_all();
        let handles = std::mem::take(&mut *lock_unpoisoned(&self.handles));
        for h in handles {
            if h.join().is_err() {
                tracing::error!("a crypto helper panicked");
            }
        }
    }

    /// How many chunks a batch of `len` items is cut into (1: inline):
    /// up to [`CHUNKS_PER_THREAD`] per thread that may take part, none
    /// smaller than `min_chunk`.
    pub fn chunks_for(&self, len: usize) -> usize {
        if self.helpers == 0 {
            return 1;
        }
        ((self.helpers + 1) * CHUNKS_PER_THREAD)
            .min(len / self.min_chunk)
            .max(1)
    }
}

impl Drop for CryptoPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One worker's way into the pool; see [`Submitter::run`].
pub struct Submitter {
    pool: Arc<CryptoPool>,
    job: Arc<Job>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Submitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submitter").finish_non_exhaustive()
    }
}

/// Takes back what no helper took and waits for the helpers that did:
/// run on every exit of [`Submitter::run`], unwinding included, so no
/// helper ever sees the borrowed items after `run` returns.
struct Retire<'a> {
    shared: &'a Shared,
    job: &'a Arc<Job>,
}

impl Drop for Retire<'_> {
    fn drop(&mut self) {
        {
            let mut q = self.shared.lock();
            let before = q.jobs.len();
            q.jobs.retain(|j| !Arc::ptr_eq(j, self.job));
            let removed = before - q.jobs.len();
            if removed > 0 {
                self.shared.queued.fetch_sub(removed, Ordering::Relaxed);
            }
        }
        // No helper can take the job any more; wait for those that did
        // (they are at most one chunk away from letting go).
        let mut spins = 0u32;
        while self.job.users.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Submitter {
    /// Runs `op` over all of `items`, in chunks of consecutive items, on
    /// this thread and the pool's helpers; returns when every item has
    /// been processed. Each item is in exactly one chunk; chunks are
    /// processed in any order and concurrently, so `op` must only depend
    /// on the items it is given (results go into the items themselves,
    /// in place: the caller reads them afterwards in its own order).
    /// `op` gets a scratch buffer of the thread that runs it.
    pub fn run<T, F>(&mut self, items: &mut [T], op: &F)
    where
        T: Send,
        F: Fn(&mut [T], &mut Vec<u8>) + Sync,
    {
        let len = items.len();
        let chunks = self.pool.chunks_for(len);
        if chunks <= 1 {
            op(items, &mut self.scratch);
            return;
        }
        let chunk = len.div_ceil(chunks);
        let chunks = len.div_ceil(chunk);
        // SAFETY: no helper can see the job now: it is not queued (every
        // `run` takes its entries back before returning) and `users` is 0
        // (`Retire` waited for it).
        unsafe {
            *self.job.task.get() = Task {
                run: run_chunk::<T, F>,
                op: (op as *const F).cast(),
                data: items.as_mut_ptr().cast(),
                len,
                chunk,
                chunks,
            };
        }
        self.job.next.store(0, Ordering::Relaxed);
        self.job.done.store(0, Ordering::Relaxed);
        let shared = &*self.pool.shared;
        shared.split_batches.fetch_add(1, Ordering::Relaxed);
        let wanted = (chunks - 1).min(self.pool.helpers);
        let retire = Retire {
            shared,
            job: &self.job,
        };
        {
            // The lock publishes the task to whichever helper pops it.
            let mut q = shared.lock();
            for _ in 0..wanted {
                q.jobs.push_back(self.job.clone());
            }
            shared.queued.fetch_add(wanted, Ordering::Relaxed);
            let sleepers = q.sleepers.min(wanted);
            drop(q);
            for _ in 0..sleepers {
                shared.wake.notify_one();
            }
        }
        self.job.help(&mut self.scratch);
        // Every chunk is claimed; wait for those still being processed.
        let mut spins = 0u32;
        while self.job.done.load(Ordering::Acquire) < chunks {
            spins += 1;
            if spins < 1024 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        drop(retire);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An item of a simulated open: `bad` ones fail.
    #[derive(Debug, Clone, Copy, Default)]
    struct Item {
        seq: u64,
        bad: bool,
        result: Option<u64>,
        thread: u64,
    }

    fn thread_id() -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::thread::current().id().hash(&mut h);
        h.finish()
    }

    #[test]
    fn results_come_back_in_submission_order_and_a_failure_shifts_nothing() {
        let pool = Arc::new(CryptoPool::start(3, 4, Duration::from_micros(20)).unwrap());
        let mut sub = pool.submitter();
        let mut threads = std::collections::HashSet::new();
        let mut items = vec![Item::default(); 1000];
        for round in 0..200u64 {
            let n = (round as usize * 7) % 1000 + 1;
            for (i, it) in items[..n].iter_mut().enumerate() {
                *it = Item {
                    seq: round * 10_000 + i as u64,
                    bad: i % 13 == 5,
                    result: None,
                    thread: 0,
                };
            }
            sub.run(
                &mut items[..n],
                &|chunk: &mut [Item], scratch: &mut Vec<u8>| {
                    scratch.clear();
                    for it in chunk {
                        // A bit of work so that helpers get to take chunks.
                        let mut x = it.seq;
                        for _ in 0..200 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                        std::hint::black_box(x);
                        it.result = (!it.bad).then_some(it.seq * 2);
                        it.thread = thread_id();
                    }
                },
            );
            for (i, it) in items[..n].iter().enumerate() {
                assert_eq!(it.seq, round * 10_000 + i as u64);
                if i % 13 == 5 {
                    assert_eq!(it.result, None, "round {round} item {i}");
                } else {
                    assert_eq!(it.result, Some(it.seq * 2), "round {round} item {i}");
                }
                threads.insert(it.thread);
            }
        }
        // The helpers took part (not everything ran inline).
        assert!(
            threads.len() > 1,
            "only {} thread(s) did work",
            threads.len()
        );
        pool.stop();
    }

    #[test]
    fn small_batches_run_inline_and_without_helpers_everything_does() {
        let pool = Arc::new(CryptoPool::start(0, 4, Duration::ZERO).unwrap());
        assert_eq!(pool.chunks_for(1000), 1);
        let mut sub = pool.submitter();
        let mut items = vec![Item::default(); 100];
        let me = thread_id();
        sub.run(&mut items, &|chunk: &mut [Item], _: &mut Vec<u8>| {
            for it in chunk {
                it.thread = thread_id();
            }
        });
        assert!(items.iter().all(|it| it.thread == me));

        let pool = Arc::new(CryptoPool::start(2, 16, Duration::ZERO).unwrap());
        assert_eq!(pool.chunks_for(31), 1);
        assert_eq!(pool.chunks_for(32), 2);
        assert_eq!(pool.chunks_for(100), 6);
        assert_eq!(pool.chunks_for(10_000), 3 * CHUNKS_PER_THREAD);
        let mut sub = pool.submitter();
        let mut items = vec![Item::default(); 31];
        sub.run(&mut items, &|chunk: &mut [Item], _: &mut Vec<u8>| {
            for it in chunk {
                it.thread = thread_id();
            }
        });
        assert!(items.iter().all(|it| it.thread == me));
    }

    #[test]
    fn many_submitters_share_one_pool() {
        let pool = Arc::new(CryptoPool::start(2, 2, Duration::from_micros(10)).unwrap());
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                let mut sub = pool.submitter();
                std::thread::spawn(move || {
                    let mut items = vec![0u64; 257];
                    for round in 0..300u64 {
                        for (i, x) in items.iter_mut().enumerate() {
                            *x = w << 48 | round << 16 | i as u64;
                        }
                        sub.run(&mut items, &|chunk: &mut [u64], _: &mut Vec<u8>| {
                            for x in chunk {
                                *x = x.wrapping_add(1);
                            }
                        });
                        for (i, x) in items.iter().enumerate() {
                            assert_eq!(*x, (w << 48 | round << 16 | i as u64) + 1);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        pool.stop();
    }
}
