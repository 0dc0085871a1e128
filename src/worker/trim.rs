//! How the worker's heap (glibc malloc) gives memory back: kept for reuse
//! while requests come and go, returned to the OS after many connections
//! were parked at once (their tasks were freed, but glibc keeps freed pages
//! resident until asked).

/// Blocks up to this size come from the heap rather than their own mmap.
const MMAP_THRESHOLD: libc::c_int = 4 << 20;
/// Free memory at the top of a heap kept for reuse, up to this much.
const TRIM_THRESHOLD: libc::c_int = 32 << 20;

/// Sets glibc's mmap and trim thresholds at start-up, once, before any
/// worker thread exists.
///
/// Why: an on-the-fly compressor allocates its working memory per response
/// (brotli level 5 about 1.5 MB: a 1 MB hash table and its ring buffer;
/// gzip a few hundred KB). With glibc's defaults those blocks are mapped
/// fresh and unmapped again for every response, so each response paid for
/// some 400 page faults and the kernel zeroing the pages: a quarter of a
/// brotli response's CPU. Kept in the heap, the next response reuses the
/// same pages. Set explicitly, glibc's dynamic threshold (which would grow
/// on its own only after a first mmapped free, and keep trimming the top)
/// is off. Bigger blocks (a 16 MB brotli window) are still mapped apart.
/// Memory freed in bulk is still returned by [`release_free_memory`].
pub fn tune_allocator() {
    // SAFETY: mallopt only changes the allocator's parameters; it is
    // called from the main thread before any other thread is started, with
    // parameters and values glibc documents (M_MMAP_THRESHOLD at most
    // HEAP_MAX_SIZE/2, 32 MB on 64-bit).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

/// `malloc_trim(0)`: releases whole free pages from every malloc arena.
pub fn release_free_memory() {
    // SAFETY: malloc_trim has no preconditions; it is thread-safe and only
    // returns unused pages of the allocator's own heaps to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
