//! Scratch memory for generated CPU kernels: a stack of blocks per thread,
//! kept between calls, so a kernel run again with sizes it has seen
//! allocates nothing.
//!
//! Generated C asks for all the scratch buffers of one scope at once — the
//! entry point for the slots of its arena (`tgc_core::cpu::arena`), a
//! kernel function for its carries, a task for its packed panels or row
//! temporaries — through [`acquire`] (for C, the runtime table's
//! `scratch_acquire`), and gives them back through [`release`] before it
//! returns. Scopes nest, last in first out, on each thread: the `d`-th
//! scope open on a thread gets block `d` of that thread's stack, grown
//! (freed and allocated again, contents not kept) when it is too small. A
//! call nested by work stealing (a kernel called from a task of another
//! thread pool, which runs other tasks while it waits) is one scope
//! deeper and gets a block of its own. A thread's blocks are freed when
//! the thread exits, or by [`trim`].
//!
//! Each buffer starts at a multiple of [`SCRATCH_ALIGN`] bytes, its size
//! rounded up to one, so buffers never share a cache line; the memory is
//! not initialised.
//!
//! Generated Rust, which contains no `unsafe`, takes zeroed vectors from a
//! per-thread pool instead ([`take`], [`give`]).

use std::alloc::{alloc, dealloc, Layout};
use std::cell::RefCell;

/// The alignment in bytes of every scratch buffer and the granule its size
/// is rounded up to: a cache line of x86-64 and of most Arm cores, and the
/// width of an AVX-512 vector.
pub const SCRATCH_ALIGN: usize = 64;

/// A scope's handle: its depth on the thread's stack, from 1.
pub type Handle = usize;

/// One block of a thread's stack.
struct Block {
    ptr: *mut u8,
    bytes: usize,
}

impl Block {
    /// Makes the block at least `bytes` long, dropping its contents;
    /// `false` when the allocation fails (the block is then empty).
    fn reserve(&mut self, bytes: usize) -> bool {
        if bytes <= self.bytes {
            return true;
        }
        self.free();
        let Ok(layout) = Layout::from_size_align(bytes, SCRATCH_ALIGN) else { return false };
        // SAFETY: `bytes > self.bytes ≥ 0`, so the layout's size is nonzero.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            return false;
        }
        (self.ptr, self.bytes) = (ptr, bytes);
        true
    }

    fn free(&mut self) {
        if self.bytes > 0 {
            // SAFETY: `ptr` was allocated by `reserve` with this layout.
            unsafe { dealloc(self.ptr, Layout::from_size_align_unchecked(self.bytes, SCRATCH_ALIGN)) };
        }
        (self.ptr, self.bytes) = (std::ptr::null_mut(), 0);
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        self.free();
    }
}

/// A thread's stack: its blocks and how many scopes are open.
#[derive(Default)]
struct Stack {
    blocks: Vec<Block>,
    depth: usize,
}

thread_local! {
    static STACK: RefCell<Stack> = RefCell::new(Stack::default());
}

/// Opens a scope of `sizes.len()` buffers of `sizes[i]` bytes on the
/// calling thread and writes their addresses to `ptrs` (which must be as
/// long); returns the handle to [`release`] them with. `None`, with nothing
/// opened, when a size is negative, their aligned sum overflows `isize`, or
/// the allocation fails.
pub fn acquire(sizes: &[i64], ptrs: &mut [*mut u8]) -> Option<Handle> {
    if ptrs.len() != sizes.len() {
        return None;
    }
    let mut offsets = 0usize;
    for &s in sizes {
        let s = usize::try_from(s).ok()?;
        offsets = offsets.checked_add(s.checked_next_multiple_of(SCRATCH_ALIGN)?)?;
    }
    if offsets > isize::MAX as usize {
        return None;
    }
    STACK
        .try_with(|stack| {
            let mut stack = stack.borrow_mut();
            let depth = stack.depth;
            if stack.blocks.len() == depth {
                stack.blocks.push(Block { ptr: std::ptr::null_mut(), bytes: 0 });
            }
            let block = &mut stack.blocks[depth];
            // One byte at least, so every address is in the block.
            if !block.reserve(offsets.max(1)) {
                return None;
            }
            let base = block.ptr;
            let mut at = 0usize;
            for (p, &s) in ptrs.iter_mut().zip(sizes) {
                *p = base.wrapping_add(at);
                at += (s as usize).next_multiple_of(SCRATCH_ALIGN);
            }
            stack.depth = depth + 1;
            Some(depth + 1)
        })
        .ok()
        .flatten()
}

/// Closes the scope `handle` of the calling thread, and any opened after
/// it that are still open: their buffers may be handed out again. A handle
/// that is not open is ignored.
pub fn release(handle: Handle) {
    let _ = STACK.try_with(|stack| {
        let mut stack = stack.borrow_mut();
        if (1..=stack.depth).contains(&handle) {
            stack.depth = handle - 1;
        }
    });
}

/// Frees the calling thread's blocks that no open scope holds (the next
/// scope at their depth allocates again) and its pooled vectors
/// ([`take`]). Returns the bytes freed.
pub fn trim() -> usize {
    let blocks = STACK
        .try_with(|stack| {
            let mut stack = stack.borrow_mut();
            let depth = stack.depth;
            let freed = stack.blocks[depth..].iter().map(|b| b.bytes).sum();
            stack.blocks.truncate(depth);
            freed
        })
        .unwrap_or(0);
    blocks + trim_pools()
}

/// The bytes the calling thread's blocks hold.
pub fn held() -> usize {
    STACK.try_with(|stack| stack.borrow().blocks.iter().map(|b| b.bytes).sum()).unwrap_or(0)
}

/// An element type of the vectors generated Rust takes for its temporaries
/// ([`take`]): each type has its own pool per thread.
pub trait Pooled: Copy + 'static {
    /// The value [`take`] fills with.
    const ZERO: Self;

    /// Runs `f` on the calling thread's pool of this type; `None` while the
    /// thread is being torn down or the pool is in use.
    fn with_pool<R>(f: impl FnOnce(&mut Vec<Vec<Self>>) -> R) -> Option<R>;
}

macro_rules! pooled {
    ($($t:ty = $zero:expr),* $(,)?) => {$(
        impl Pooled for $t {
            const ZERO: Self = $zero;

            fn with_pool<R>(f: impl FnOnce(&mut Vec<Vec<Self>>) -> R) -> Option<R> {
                thread_local! {
                    static POOL: RefCell<Vec<Vec<$t>>> = const { RefCell::new(Vec::new()) };
                }
                POOL.try_with(|p| p.try_borrow_mut().ok().map(|mut p| f(&mut p))).ok().flatten()
            }
        }
    )*};
}

pooled!(f32 = 0.0, i32 = 0, bool = false, half::f16 = half::f16::ZERO, half::bf16 = half::bf16::ZERO);

/// `len` zeros of `T` in a vector from the calling thread's pool (the one
/// [`give`] returned last), or a new one: generated Rust (`kernel!`) takes
/// its temporaries and GEMM panels here and gives them back before it
/// returns, so a warm call reuses them instead of allocating (a vector
/// grows only when `len` exceeds what it held).
pub fn take<T: Pooled>(len: usize) -> Vec<T> {
    let mut v = T::with_pool(Vec::pop).flatten().unwrap_or_default();
    v.clear();
    v.resize(len, T::ZERO);
    v
}

/// Returns `v` to the calling thread's pool for the next [`take`].
pub fn give<T: Pooled>(v: Vec<T>) {
    let mut v = Some(v);
    let _ = T::with_pool(|p| p.extend(v.take()));
}

/// Empties the calling thread's pools of vectors.
fn trim_pools() -> usize {
    fn drain<T: Pooled>() -> usize {
        T::with_pool(|p| std::mem::take(p).iter().map(|v| v.capacity() * std::mem::size_of::<T>()).sum()).unwrap_or(0)
    }
    drain::<f32>() + drain::<i32>() + drain::<bool>() + drain::<half::f16>() + drain::<half::bf16>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(sizes: &[i64]) -> (Handle, Vec<*mut u8>) {
        let mut ptrs = vec![std::ptr::null_mut(); sizes.len()];
        let h = acquire(sizes, &mut ptrs).expect("scratch");
        (h, ptrs)
    }

    #[test]
    fn buffers_are_aligned_disjoint_and_writable() {
        let (h, ptrs) = open(&[3, 100, 0, 64]);
        for p in &ptrs {
            assert_eq!(*p as usize % SCRATCH_ALIGN, 0);
        }
        assert_eq!(ptrs[1] as usize - ptrs[0] as usize, 64);
        assert_eq!(ptrs[2] as usize - ptrs[1] as usize, 128);
        // SAFETY: buffer 1 has 100 bytes.
        unsafe { std::ptr::write_bytes(ptrs[1], 7, 100) };
        release(h);
        trim();
        assert_eq!(held(), 0);
    }

    #[test]
    fn nested_scopes_get_their_own_blocks_and_reuse_them() {
        let (outer, a) = open(&[256]);
        let (inner, b) = open(&[256]);
        assert_ne!(a[0], b[0]);
        assert_eq!(inner, outer + 1);
        release(inner);
        let (again, c) = open(&[128]);
        assert_eq!((again, c[0]), (inner, b[0]), "a smaller request reuses the block");
        release(again);
        release(outer);
        let (h, d) = open(&[200]);
        assert_eq!(d[0], a[0]);
        release(h);
        assert_eq!(held(), 512);
        assert_eq!(trim(), 512);
        assert_eq!(held(), 0);
    }

    #[test]
    fn releasing_an_outer_scope_closes_the_inner_ones() {
        let (outer, _) = open(&[8]);
        let (_inner, _) = open(&[8]);
        release(outer);
        let (h, _) = open(&[8]);
        assert_eq!(h, outer);
        release(h);
        release(h + 5);
        let (h2, _) = open(&[8]);
        assert_eq!(h2, outer, "a handle that is not open changes nothing");
        release(h2);
        trim();
    }

    #[test]
    fn pooled_vectors_come_back_zeroed_and_keep_their_memory() {
        let mut a: Vec<f32> = take(100);
        a.iter_mut().for_each(|x| *x = 1.5);
        let at = a.as_ptr();
        give(a);
        let b: Vec<f32> = take(60);
        assert_eq!((b.as_ptr(), b.len()), (at, 60), "the vector given back, shortened");
        assert!(b.iter().all(|&x| x == 0.0));
        let c: Vec<f32> = take(10);
        assert_ne!(c.as_ptr(), at, "the pool was empty: a new vector");
        give(c);
        give(b);
        let d: Vec<i32> = take(3);
        assert_eq!(d, [0, 0, 0], "each type has its own pool");
        give(d);
        assert!(trim() >= 100 * 4 + 10 * 4 + 3 * 4, "the pools' vectors");
        assert_eq!(trim(), 0, "trim emptied the pools");
    }

    #[test]
    fn bad_sizes_open_nothing() {
        let mut p = [std::ptr::null_mut(); 2];
        assert_eq!(acquire(&[-1, 8], &mut p), None);
        assert_eq!(acquire(&[i64::MAX, i64::MAX], &mut p), None);
        assert_eq!(acquire(&[8], &mut p), None, "one pointer per size");
        let (h, _) = open(&[8]);
        assert_eq!(h, 1, "no scope was left open");
        release(h);
        trim();
    }
}
