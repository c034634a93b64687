//! Gives the allocator's free memory back to the system.
//!
//! A daemon cycle of a large cluster reads, parses and plans on threads
//! that end with it; mimalloc (the global allocator, main.rs) keeps the
//! pages those threads freed, abandoned to the next threads, and purges
//! them only lazily. Resident memory then settles at the level of the
//! largest cycle seen so far instead of what the daemon holds between
//! cycles (docs/performance.md, goal 4).

// The workspace denies unsafe code; this module is its one exception.
#![allow(unsafe_code)]

unsafe extern "C" {
    /// mimalloc's `void mi_collect(bool force)` (mimalloc.h), linked into
    /// the binary with the allocator itself (libmimalloc-sys).
    fn mi_collect(force: bool);
}

/// Frees what the allocator holds but nothing uses: the calling thread's
/// free pages and, called from the main thread, the pages of threads that
/// ended. Costs a walk over the allocator's segments: call it between
/// cycles, not in one.
pub fn release_free_memory() {
    // SAFETY: mi_collect takes no pointer and only walks mimalloc's own
    // data structures under its own locks; it may run on any thread at
    // any time, other threads allocating meanwhile (mimalloc.h). mimalloc
    // is the global allocator, so the symbol is linked in.
    unsafe { mi_collect(true) }
}
