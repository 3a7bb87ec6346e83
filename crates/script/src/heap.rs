//! A `js:` step runtime's heap, bounded here rather than by QuickJS's own
//! limit, so that running out is known for certain: QuickJS, out of room
//! even for its error, may throw `null`, which a step could throw too.

use std::cell::Cell;
use std::ptr;
use std::rc::Rc;

use rquickjs::allocator::{Allocator, RustAllocator};

/// Rust's allocator, refusing what would take the heap past `limit`
/// bytes (and saying so in `hit`).
pub(crate) struct Bounded {
    used: usize,
    limit: usize,
    hit: Rc<Cell<bool>>,
}

impl Bounded {
    pub(crate) fn new(limit: usize, hit: Rc<Cell<bool>>) -> Bounded {
        Bounded { used: 0, limit, hit }
    }

    /// Whether `more` bytes fit; if not, the limit was hit.
    fn fits(&mut self, more: usize) -> bool {
        let fits = self.used.saturating_add(more) <= self.limit;
        if !fits {
            self.hit.set(true);
        }
        fits
    }
}

// SAFETY: every pointer comes from RustAllocator and goes back to it;
// only the count of bytes in use is added.
unsafe impl Allocator for Bounded {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.fits(size) {
            return ptr::null_mut();
        }
        let p = RustAllocator.alloc(size);
        if !p.is_null() {
            // SAFETY: a pointer RustAllocator just returned.
            self.used += unsafe { RustAllocator::usable_size(p) };
        }
        p
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        match count.checked_mul(size) {
            Some(total) if self.fits(total) => {
                let p = RustAllocator.calloc(count, size);
                if !p.is_null() {
                    // SAFETY: a pointer RustAllocator just returned.
                    self.used += unsafe { RustAllocator::usable_size(p) };
                }
                p
            }
            _ => ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&mut self, p: *mut u8) {
        if p.is_null() {
            return;
        }
        // SAFETY: the caller gives a pointer this allocator returned.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(p));
            RustAllocator.dealloc(p);
        }
    }

    unsafe fn realloc(&mut self, p: *mut u8, new_size: usize) -> *mut u8 {
        if p.is_null() {
            return self.alloc(new_size);
        }
        if new_size == 0 {
            // SAFETY: as dealloc.
            unsafe { self.dealloc(p) };
            return ptr::null_mut();
        }
        // SAFETY: the caller gives a pointer this allocator returned.
        let old = unsafe { RustAllocator::usable_size(p) };
        if new_size > old && !self.fits(new_size - old) {
            return ptr::null_mut();
        }
        // SAFETY: as above; on failure the old block stays, counted.
        let q = unsafe { RustAllocator.realloc(p, new_size) };
        if !q.is_null() {
            // SAFETY: a pointer RustAllocator just returned.
            self.used = self.used.saturating_sub(old) + unsafe { RustAllocator::usable_size(q) };
        }
        q
    }

    unsafe fn usable_size(p: *mut u8) -> usize {
        // SAFETY: the caller gives a pointer this allocator returned.
        unsafe { RustAllocator::usable_size(p) }
    }
}
