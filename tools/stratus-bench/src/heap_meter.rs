//! A heap meter for the benchmarks: the live heap bytes allocated by
//! *tagged* threads (the runtime the controllers run on), and their peak,
//! so `bench ccm` can report the controllers' own memory apart from the
//! in-process API server's.
//!
//! The controllers talk to the API server over real TCP, so no heap object
//! crosses between the two runtimes; memory allocated on a tagged thread
//! and freed on another (or the reverse) would skew the count, which is why
//! each phase reports its peak above the level at its start.

// Unsafe is needed here and only here: a global allocator is an `unsafe`
// trait. Every method forwards to `System` unchanged and only adds atomic
// counting; no pointer is read, written or invented.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

/// The allocator: `System`, counting tagged threads' bytes.
pub struct HeapMeter;

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);
/// The same live allocations counted as glibc's malloc lays them out: each
/// in a chunk of its size plus an 8-byte header, rounded up to 16 bytes, at
/// least 32 — the memory they take, not only the bytes asked for.
static LIVE_CHUNKS: AtomicI64 = AtomicI64::new(0);

fn chunk(bytes: usize) -> i64 {
    let chunk = (bytes.saturating_add(8 + 15) & !15).max(32);
    i64::try_from(chunk).unwrap_or(i64::MAX)
}

thread_local! {
    static TAGGED: Cell<bool> = const { Cell::new(false) };
}

fn tagged() -> bool {
    TAGGED.try_with(Cell::get).unwrap_or(false)
}

fn add(bytes: usize) {
    LIVE_CHUNKS.fetch_add(chunk(bytes), Ordering::Relaxed);
    let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn sub(bytes: usize) {
    LIVE_CHUNKS.fetch_sub(chunk(bytes), Ordering::Relaxed);
    LIVE.fetch_sub(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
}

// SAFETY: every method delegates to `System` with the caller's arguments and
// returns its result untouched; the counting has no effect on memory.
unsafe impl GlobalAlloc for HeapMeter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() && tagged() {
            add(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() && tagged() {
            add(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from the caller, who got them from
        // this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) };
        if tagged() {
            sub(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() && tagged() {
            sub(layout.size());
            add(new_size);
        }
        new
    }
}

/// Count this thread's allocations from now on (for `on_thread_start`).
pub(crate) fn tag_thread() {
    let _ = TAGGED.try_with(|t| t.set(true));
}

/// The live tagged bytes now.
pub(crate) fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// The live tagged allocations with malloc's chunk overhead (see
/// `LIVE_CHUNKS`).
pub(crate) fn live_chunks() -> i64 {
    LIVE_CHUNKS.load(Ordering::Relaxed)
}

/// Restart the peak from the live level; returns that level.
pub(crate) fn reset_peak() -> i64 {
    let live = live();
    PEAK.store(live, Ordering::Relaxed);
    live
}

/// The peak of live tagged bytes since the last reset.
pub(crate) fn peak() -> i64 {
    PEAK.load(Ordering::Relaxed)
}
