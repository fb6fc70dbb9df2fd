//! A global allocator that refuses, loudly, any single allocation larger than
//! [`CAP_BYTES`]: no input dtsim accepts needs one, and without the cap a bad input (10^30
//! GPUs) aborts the process with "memory allocation failed" and no word of which case it was.
//! On refusal it prints the case being run ([`crate::harness::current_case`]) and aborts.

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation a case may make: 4 GiB.
pub const CAP_BYTES: usize = 4 << 30;

pub struct Capped;

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP_BYTES {
            refuse(layout.size());
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP_BYTES {
            refuse(layout.size());
        }
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > CAP_BYTES {
            refuse(new_size);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn refuse(bytes: usize) -> ! {
    // No allocation here: the case description was formatted before the case ran.
    crate::harness::report_current_case_and_abort(bytes)
}
