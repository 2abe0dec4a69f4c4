// A global allocator that counts the allocations of each thread and of the
// whole process, for the tests that prove a warm kernel call allocates
// nothing; `include!`d by `tests/allocations.rs` and
// `examples/minilm/tests/allocations.rs` (a global allocator is per test
// binary).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Allocations on every thread.
static EVERYWHERE: AtomicUsize = AtomicUsize::new(0);

struct Counting;

thread_local! {
    /// The calling thread's allocations (a constant initialiser: reading it
    /// allocates nothing).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    EVERYWHERE.fetch_add(1, Ordering::Relaxed);
}

/// The calling thread's allocations so far.
#[allow(dead_code)]
fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// The process's allocations so far, on every thread (meaningful in a test
/// binary whose tests do not run side by side).
#[allow(dead_code)]
fn allocations_everywhere() -> usize {
    EVERYWHERE.load(Ordering::Relaxed)
}

// SAFETY: forwards to `System`, counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
