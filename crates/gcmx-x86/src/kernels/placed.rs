//! [`Placed`]: an owned [`Keys`] on a cache line inside an ordinary heap allocation.
//!
//! `Box<Keys>` (the type is aligned to 64 bytes) sends every key set-up through the system
//! allocator's aligned allocation, which glibc serves several times slower than an ordinary one
//! (its `posix_memalign` splits a larger block and frees the pieces). Here the allocation is an
//! ordinary one of 16-byte units, three units longer than `Keys`, and the key sits at the first
//! line boundary inside it: the kernels still see a line-aligned `&Keys`, so every table entry is
//! at a constant offset from the key's address and each 512-bit register of powers is one line.
//!
//! The storage of a key a thread dropped is kept for that thread's next key ([`SPARE`]):
//! a block of this size (about 1.4 KiB) is past glibc's per-thread cache, and its allocation,
//! zeroing and free were a quarter of a key's set-up (benches/results.md). Dropping a key wipes
//! it in its storage before the storage is kept, so a kept block is all zero where a key is
//! read, as a new one is.

use core::cell::Cell;
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};

use super::{Keys, Level};

/// 16-byte units of the allocation: `Keys` and up to 48 bytes before the first line boundary.
const UNITS: usize = size_of::<Keys>() / 16 + 3;

// The storage's units are 16-byte aligned (`u128`), so a line boundary is at most three in.
const _: () = assert!(align_of::<u128>() == 16 && align_of::<Keys>() == 64);
const _: () = assert!(size_of::<Keys>().is_multiple_of(16));

/// A [`Keys`] owned on the heap, line-aligned; moving it moves a pointer. Dropping it runs
/// `Keys`' drop (which wipes the round keys and powers), then frees the storage.
pub(crate) struct Placed {
    /// The key, at the first 64-byte boundary inside zeroed storage of [`UNITS`] units that
    /// `Box::leak` gave up: one pointer, as a `Box<Keys>` is (the storage's start is `Keys::at`
    /// units before it).
    keys: NonNull<Keys>,
}

// SAFETY: a `Placed` owns its key and storage alone (as a `Box` does), and `Keys` is plain data
// (integers, and a `Level`): sending it or sharing `&Placed` between threads is sharing
// `&Keys`, which is `Sync`.
#[allow(unsafe_code)]
unsafe impl Send for Placed {}
#[allow(unsafe_code)]
unsafe impl Sync for Placed {}

impl Placed {
    /// An all-zero key for `level`, built in its place on the heap (no copy of it is made
    /// anywhere else): in this thread's spare storage if it has one.
    pub(crate) fn zeroed(level: Level) -> Placed {
        let base = SPARE
            .try_with(|s| s.0.take())
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                let storage = Box::leak(vec![0u128; UNITS].into_boxed_slice());
                NonNull::from(storage).cast::<u128>()
            });
        // Units (16 bytes each) from the storage's start to the next 64-byte boundary.
        let at = (base.as_ptr() as usize).wrapping_neg() % 64 / 16;
        #[allow(unsafe_code)]
        // SAFETY: `at <= 3` and `UNITS` is three units more than `Keys`, so `size_of::<Keys>()`
        // bytes from unit `at` lie inside the storage, which this function owns alone (new, or
        // taken from the spare slot, which held it alone); that address is 64-byte aligned
        // (`Keys`' alignment). Every field of `Keys` but `level` is integers, for which any
        // initialized bytes are a valid value: zero in new storage; in spare storage the table
        // and round keys zero (wiped by the key dropped from it, at this same `at`: the same
        // address) and `nr`, `level` and `at` left from that key. Those three are written here
        // before any reference to the key is made.
        let keys = unsafe {
            let keys = base.add(at).cast::<Keys>();
            ptr::addr_of_mut!((*keys.as_ptr()).nr).write(0);
            ptr::addr_of_mut!((*keys.as_ptr()).level).write(level);
            ptr::addr_of_mut!((*keys.as_ptr()).at).write(at as u8);
            keys
        };
        Placed { keys }
    }
}

impl Deref for Placed {
    type Target = Keys;

    #[inline(always)]
    fn deref(&self) -> &Keys {
        #[allow(unsafe_code)]
        // SAFETY: `Placed::zeroed` made `keys` a valid, aligned `Keys` inside the storage this
        // value owns; the borrow of `self` keeps it alive and unmodified.
        unsafe {
            self.keys.as_ref()
        }
    }
}

impl DerefMut for Placed {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Keys {
        #[allow(unsafe_code)]
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference to the key.
        unsafe {
            self.keys.as_mut()
        }
    }
}

impl Drop for Placed {
    /// Wipes the key (`Keys`' drop), then keeps its storage as this thread's spare if the thread
    /// has none or this one is at a lower address (freeing the one it replaces), else frees it.
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: the key is valid (see `deref`); `at` is read before it is dropped, once, here.
        // The storage starts `at` units before the key and is `UNITS` long (`zeroed`); this
        // value owned it alone and gives it up here, to the spare slot or to `free`.
        let base = unsafe {
            let at = usize::from(self.keys.as_ref().at);
            ptr::drop_in_place(self.keys.as_ptr());
            self.keys.cast::<u128>().sub(at)
        };
        // Of this block and the spare, the one at the lower address is kept and the other freed,
        // so that a thread that builds and drops its keys in the same order each time gets them
        // at the same addresses, as from the allocator alone (keeping whichever block found the
        // slot empty, two keys alive at once alternated between two addresses; the constant-time
        // tests compare the addresses of runs). Keeping the newest block instead, keys built
        // eight at a time took a quarter longer (benches/results.md); this way, as long as before.
        let freed = SPARE
            .try_with(|s| match s.0.get() {
                Some(old) if old <= base => Some(base),
                old => {
                    s.0.set(Some(base));
                    old
                }
            })
            .unwrap_or(Some(base));
        if let Some(old) = freed {
            #[allow(unsafe_code)]
            // SAFETY: `old` is storage of `UNITS` units from `Box::leak` that this value (above)
            // or the slot owned alone, and that neither holds any more.
            unsafe {
                free(old)
            };
        }
    }
}

/// A thread's spare key storage: `UNITS` units from `Box::leak`, a dropped key's, wiped. Freed
/// when the thread exits.
struct Spare(Cell<Option<NonNull<u128>>>);

impl Drop for Spare {
    fn drop(&mut self) {
        if let Some(base) = self.0.take() {
            #[allow(unsafe_code)]
            // SAFETY: the slot owned this storage alone (`Placed::drop` put it there, and
            // `Placed::zeroed` takes it out before using it).
            unsafe {
                free(base)
            };
        }
    }
}

std::thread_local! {
    /// This thread's spare storage (see the module's documentation).
    static SPARE: Spare = const { Spare(Cell::new(None)) };
}

/// Gives key storage back to the allocator.
///
/// # Safety
///
/// `base` is the start of `UNITS` units that `Box::leak` gave up, owned by the caller alone,
/// and is not used again.
#[allow(unsafe_code)]
unsafe fn free(base: NonNull<u128>) {
    // SAFETY: the caller's contract: the slice `Box::leak` gave up, freed once.
    unsafe {
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(
            base.as_ptr(),
            UNITS,
        )))
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
            let k = p.keys.as_ptr() as usize;
            let s = k - 16 * usize::from(p.at);
            assert_eq!(k % 64, 0);
            assert!(k >= s && k + size_of::<Keys>() <= s + 16 * UNITS);
            assert_eq!(p.level(), Level::Narrow);
        }
    }

    /// A dropped key's storage goes to the thread's next key, wiped; a key built while that
    /// one lives gets storage of its own; of two dropped, the lower is kept.
    #[test]
    fn a_dropped_keys_storage_comes_back_wiped() {
        let mut a = Placed::zeroed(Level::Narrow);
        a.t.as_flattened_mut().fill(u128::MAX);
        a.rk.fill(u128::MAX);
        a.nr = 14;
        let at = a.keys;
        drop(a);
        let b = Placed::zeroed(Level::Wide);
        assert_eq!(b.keys, at);
        assert!(b.t.as_flattened().iter().chain(&b.rk).all(|&x| x == 0));
        assert_eq!((b.nr, b.level()), (0, Level::Wide));
        let c = Placed::zeroed(Level::Narrow);
        assert_ne!(c.keys, b.keys);
        let c_at = c.keys;
        drop(b);
        drop(c);
        assert_eq!(Placed::zeroed(Level::Narrow).keys, at.min(c_at));
    }
}
