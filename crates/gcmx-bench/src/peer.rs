//! What every implementation offers the benchmark: sealing and opening one message, in place or
//! from one buffer into another, and a pass over many messages that the benchmark times.

use std::hint::black_box;

use crate::arena::Arena;

/// Where the output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// The message is overwritten by its output.
    InPlace,
    /// The input is read and the output written to another buffer of the same length.
    Separate,
}

/// Sealing or opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Encryption: the ciphertext and its tag.
    Seal,
    /// Decryption of a valid message, its tag checked.
    Open,
}

/// A message's buffers.
#[derive(Debug)]
pub(crate) enum Io<'a> {
    /// Input and output in one buffer.
    InPlace(&'a mut [u8]),
    /// The input, and an output buffer of its length.
    Separate(&'a [u8], &'a mut [u8]),
}

/// One implementation of AES-GCM under one key (12-byte nonces, 16-byte tags).
pub(crate) trait Peer {
    /// The places this implementation's API offers.
    fn places(&self) -> &'static [Place];

    /// Encrypts `io` and returns the tag. Called only with a place from [`Peer::places`].
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16];

    /// Decrypts `io` if `tag` is right; whether it was.
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool;

    /// One timed pass: `op` on every message of `work` (in place) or from `input` into `work`
    /// (separate). Opening in place needs `work` refilled with ciphertext before each pass.
    /// (A provided method, so that each implementation gets its own loop with direct calls;
    /// every implementation's `seal` and `open` are `#[inline]`, so that the loop calls its API
    /// as a user's code would. Called, they took the `Io` through memory, and a 16-byte load of
    /// two of its fields just stored 8 bytes at a time waited for the stores to reach the cache:
    /// about 50 cycles on some implementations' separate-buffer opens of 16 bytes.)
    fn pass(&self, op: Op, place: Place, input: &Arena, work: &mut Arena, tag: &[u8; 16]) {
        for i in 0..work.count() {
            let io = match place {
                Place::InPlace => Io::InPlace(work.msg_mut(i)),
                Place::Separate => Io::Separate(input.msg(i), work.msg_mut(i)),
            };
            match op {
                Op::Seal => {
                    black_box(self.seal(&NONCE, AAD, io));
                }
                Op::Open => {
                    if !self.open(&NONCE, AAD, io, tag) {
                        refused();
                    }
                }
            }
        }
    }
}

/// The nonce of every timed message (one key, one message repeated: a benchmark only).
pub(crate) const NONCE: [u8; 12] = [0x24; 12];
/// The associated data of every timed message: none, as in the published figures.
pub(crate) const AAD: &[u8] = b"";

#[cold]
#[inline(never)]
fn refused() -> ! {
    panic!("a valid message was refused during timing")
}
