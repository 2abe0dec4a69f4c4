//! The thread pool generated CPU kernels run their tiles on: fixed workers,
//! made once, that take part in one posted job at a time, and never
//! allocate once started, so a model run is free of heap allocation
//! (`000` §8; the counting-allocator test of `tgc::model`).
//!
//! A job is a `&(dyn Fn() + Sync)` on the poster's stack, which every
//! thread that joins calls once (the caller of [`Pool::run`] too); the body
//! hands out work by itself (`cpu_rt`'s atomic task counter). The post is a
//! slot under a mutex: the job, how many workers may still join (`seats`)
//! and how many are inside (`running`), plus an epoch that counts posts. A
//! worker spins a little on the epoch before it sleeps on a condition
//! variable, so the kernels of one model, posted back to back, do not pay a
//! futex wake-up each; the poster, after its own share, takes the job down
//! (no worker joins after that) and waits until `running` is 0, so the
//! job's borrow outlives every call of it.
//!
//! One job at a time: a post while another is up — a second caller thread,
//! or a job's body posting again — runs on the caller's thread alone.
//! That is always correct and never deadlocks; two threads that run models
//! side by side share the pool's workers first come, first served.
//!
//! `std`'s `Mutex` and `Condvar` are futex words on Linux and allocate
//! nothing; the workers' names and stacks are allocated when the pool is
//! made.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Spin rounds (`spin_loop` hints) a worker waits for the next post before
/// it sleeps: about 20 µs on the 2–3 GHz machines of the benchmarks, the
/// gap between two kernels of a model.
const SPIN: u32 = 1 << 14;

/// A job's body with its lifetime erased. It is only called between its
/// post and the end of [`Pool::run`], which waits for every call.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn() + Sync));

// SAFETY: the body is `Sync` (callable from any thread); the pointer is
// only dereferenced while `Pool::run` keeps the referent alive.
unsafe impl Send for Job {}

/// The posted job and its counts.
struct Post {
    job: Option<Job>,
    /// Workers that may still join the job.
    seats: usize,
    /// Workers inside the job.
    running: usize,
    /// Posts so far.
    epoch: u64,
}

/// A pool of parked workers; see the module doc.
pub struct Pool {
    post: Mutex<Post>,
    /// Wakes workers when a job is posted.
    posted: Condvar,
    /// Wakes the poster when the last worker leaves the job.
    left: Condvar,
    /// `Post::epoch`, readable without the lock (for spinning).
    epoch: AtomicU64,
    /// A worker's call of the job panicked.
    panicked: AtomicBool,
    workers: usize,
}

impl Pool {
    /// A pool of `workers` threads named `{name}-{i}`, alive for the rest of
    /// the process. `None` when the system refuses a thread (the threads
    /// already started stay parked; every job then runs on its caller).
    pub fn start(workers: usize, name: &str) -> Option<&'static Pool> {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            post: Mutex::new(Post { job: None, seats: 0, running: 0, epoch: 0 }),
            posted: Condvar::new(),
            left: Condvar::new(),
            epoch: AtomicU64::new(0),
            panicked: AtomicBool::new(false),
            workers,
        }));
        for i in 0..workers {
            std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || pool.work()).ok()?;
        }
        Some(pool)
    }

    /// The pool's worker threads.
    pub fn workers(&self) -> usize {
        self.workers
    }

    fn lock(&self) -> MutexGuard<'_, Post> {
        // A poisoned lock only means a panic elsewhere; the counts stay
        // consistent (no code panics while holding it).
        self.post.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `job` on the caller's thread and on up to `helpers` workers at
    /// once, and returns when every call has returned. With another job up,
    /// `job` runs on the caller alone. Panics (after every call returned)
    /// when a worker's call panicked; a panic on the caller propagates
    /// after the workers are out.
    pub fn run(&self, helpers: usize, job: &(dyn Fn() + Sync)) {
        let posted = {
            let mut post = self.lock();
            if post.job.is_some() || post.running > 0 || helpers == 0 {
                false
            } else {
                // SAFETY (of the erasure): `Down` below takes the job down
                // and waits for every worker inside before `job` is dropped.
                let erased: *const (dyn Fn() + Sync + 'static) = unsafe { std::mem::transmute(job) };
                post.job = Some(Job(erased));
                post.seats = helpers.min(self.workers);
                post.epoch += 1;
                self.epoch.store(post.epoch, Ordering::Release);
                true
            }
        };
        if !posted {
            job();
            return;
        }
        self.posted.notify_all();
        /// Takes the job down and waits for the workers inside, also when
        /// the caller's share unwinds.
        struct Down<'a>(&'a Pool);
        impl Drop for Down<'_> {
            fn drop(&mut self) {
                let mut post = self.0.lock();
                post.job = None;
                post.seats = 0;
                while post.running > 0 {
                    post = self.0.left.wait(post).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
        let down = Down(self);
        job();
        drop(down);
        if self.panicked.swap(false, Ordering::AcqRel) {
            panic!("a task of the tgc CPU thread pool panicked");
        }
    }

    /// A worker: waits for posts and joins each while it has a seat.
    fn work(&self) {
        let mut seen = 0u64;
        loop {
            for _ in 0..SPIN {
                if self.epoch.load(Ordering::Acquire) != seen {
                    break;
                }
                std::hint::spin_loop();
            }
            let mut post = self.lock();
            let job = loop {
                if post.epoch != seen {
                    seen = post.epoch;
                    if let (Some(job), true) = (post.job, post.seats > 0) {
                        break job;
                    }
                }
                post = self.posted.wait(post).unwrap_or_else(|e| e.into_inner());
            };
            post.seats -= 1;
            post.running += 1;
            drop(post);
            // SAFETY: the job is up (we joined under the lock) and its
            // poster waits for `running` to reach 0 before dropping it.
            if catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)() })).is_err() {
                self.panicked.store(true, Ordering::Release);
            }
            let mut post = self.lock();
            post.running -= 1;
            if post.running == 0 {
                self.left.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_joined_call_returns_before_run_does() {
        let pool = Pool::start(3, "tgc-test").unwrap();
        for round in 0..200 {
            let calls = AtomicUsize::new(0);
            let inside = AtomicUsize::new(0);
            pool.run(3, &|| {
                inside.fetch_add(1, Ordering::SeqCst);
                calls.fetch_add(1, Ordering::SeqCst);
                std::hint::black_box((0..100).sum::<u64>());
                inside.fetch_sub(1, Ordering::SeqCst);
            });
            assert_eq!(inside.load(Ordering::SeqCst), 0, "round {round}: a call outlived run");
            let c = calls.load(Ordering::SeqCst);
            assert!((1..=4).contains(&c), "round {round}: {c} calls");
        }
    }

    #[test]
    fn a_nested_post_runs_on_its_caller() {
        let pool = Pool::start(2, "tgc-test").unwrap();
        let inner = AtomicUsize::new(0);
        pool.run(2, &|| pool.run(2, &|| _ = inner.fetch_add(1, Ordering::SeqCst)));
        // Each outer call ran the inner job once, on its own thread.
        assert!((1..=3).contains(&inner.load(Ordering::SeqCst)));
    }

    #[test]
    fn a_workers_panic_reaches_the_caller() {
        let pool = Pool::start(1, "tgc-test").unwrap();
        let main = std::thread::current().id();
        let joined = AtomicBool::new(false);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            pool.run(1, &|| {
                if std::thread::current().id() != main {
                    joined.store(true, Ordering::SeqCst);
                    panic!("a task panics on purpose");
                }
                // Keep the job up until the worker has joined.
                let t0 = std::time::Instant::now();
                while !joined.load(Ordering::SeqCst) && t0.elapsed().as_secs() < 10 {
                    std::thread::yield_now();
                }
            })
        }));
        assert!(joined.load(Ordering::SeqCst), "the worker never joined");
        assert!(caught.is_err(), "the worker's panic was lost");
        // The pool still works.
        let calls = AtomicUsize::new(0);
        pool.run(1, &|| _ = calls.fetch_add(1, Ordering::SeqCst));
        assert!(calls.load(Ordering::SeqCst) >= 1);
    }
}
