//! [`Placed`]: an owned [`Keys`] on a cache line inside an ordinary heap allocation.
//!
//! `Box<Keys>` (the type is aligned to 64 bytes) sends every key set-up through the system
//! allocator's aligned allocation, which glibc serves several times slower than an ordinary one
//! (its `posix_memalign` splits a larger block and frees the pieces). Here the allocation is an
//! ordinary one of 16-byte units, three units longer than `Keys`, and the key sits at the first
//! line boundary inside it: the kernels still see a line-aligned `&Keys`, so every table entry is
//! at a constant offset from the key's address and each 512-bit register of powers is one line.

use core::ops::{Deref, DerefMut};
use core::ptr;

use super::{Keys, Level};

/// 16-byte units of the allocation: `Keys` and up to 48 bytes before the first line boundary.
const UNITS: usize = size_of::<Keys>() / 16 + 3;

// The storage's units are 16-byte aligned (`u128`), so a line boundary is at most three in.
const _: () = assert!(align_of::<u128>() == 16 && align_of::<Keys>() == 64);
const _: () = assert!(size_of::<Keys>().is_multiple_of(16));

/// A [`Keys`] owned on the heap, line-aligned; moving it moves a pointer. Dropping it runs
/// `Keys`' drop (which wipes the round keys and powers), then frees the storage.
pub(crate) struct Placed {
    /// Zeroed storage, never read or written but through the `Keys` at unit `at`.
    storage: Box<[u128]>,
    /// The unit at which the key starts: the first at a 64-byte boundary (0 to 3).
    at: usize,
}

impl Placed {
    /// An all-zero key for `level`, built in its place on the heap (no copy of it is made
    /// anywhere else).
    pub(crate) fn zeroed(level: Level) -> Placed {
        let storage = vec![0u128; UNITS].into_boxed_slice();
        // Units (16 bytes each) from the storage's start to the next 64-byte boundary.
        let at = (storage.as_ptr() as usize).wrapping_neg() % 64 / 16;
        let mut placed = Placed { storage, at };
        let keys = placed.ptr_mut();
        #[allow(unsafe_code)]
        // SAFETY: `keys` is 64-byte aligned and `size_of::<Keys>()` bytes from it lie inside
        // the storage (`at <= 3`, `UNITS` is three units more than `Keys`), which this function
        // owns alone. Every field of `Keys` but `level` is integers, for which zero bytes are a
        // valid value; `level` is written here before any reference to the key is made.
        unsafe {
            ptr::addr_of_mut!((*keys).level).write(level)
        };
        placed
    }

    /// The key's address: unit `at` of the storage.
    #[inline(always)]
    fn ptr(&self) -> *const Keys {
        self.storage.as_ptr().wrapping_add(self.at).cast()
    }

    /// The key's address, for writing.
    #[inline(always)]
    fn ptr_mut(&mut self) -> *mut Keys {
        self.storage.as_mut_ptr().wrapping_add(self.at).cast()
    }
}

impl Deref for Placed {
    type Target = Keys;

    #[inline(always)]
    fn deref(&self) -> &Keys {
        #[allow(unsafe_code)]
        // SAFETY: `Placed::zeroed` made the bytes at `ptr()` a valid, aligned `Keys` inside the
        // storage this value owns; the borrow of `self` keeps them alive and unshared-mutably.
        unsafe {
            &*self.ptr()
        }
    }
}

impl DerefMut for Placed {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Keys {
        #[allow(unsafe_code)]
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference to the key.
        unsafe {
            &mut *self.ptr_mut()
        }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: the key is valid (see `deref`) and is dropped once, here; the storage is freed
        // after it, as an ordinary slice of integers.
        unsafe {
            ptr::drop_in_place(self.ptr_mut())
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every placement is line-aligned and inside the storage, whatever the allocator returns.
    #[test]
    fn placed_on_a_line_inside_its_storage() {
        let keep: Vec<Placed> = (0..64).map(|_| Placed::zeroed(Level::Narrow)).collect();
        for p in &keep {
            let (k, s) = (p.ptr() as usize, p.storage.as_ptr() as usize);
            assert_eq!(k % 64, 0);
            assert!(k >= s && k + size_of::<Keys>() <= s + 16 * UNITS);
            assert_eq!(p.level(), Level::Narrow);
        }
    }
}
