//! gcmx's forgery policy, in one place: what an open whose tag does not match leaves in a buffer
//! the caller passed in place ([`Refused`]).

use zeroize::Zeroize;

use crate::Error;
use crate::direction::Direction;
use crate::engine::{GcmEngine, Message};

/// What a refused open leaves in a buffer opened in place: gcmx's one forgery policy.
///
/// gcmx opens in one pass, decrypting while it hashes, so when the tag turns out wrong the
/// buffer holds plaintext that is not authenticated. Every path then does the same: it applies
/// the message's keystream a second time, which gives the buffer back as exactly the
/// ciphertext the caller passed in ([`Refused::Restored`]). Only if that second pass fails (a
/// device error) is the buffer zeroed instead ([`Refused::Zeroed`]). Either way no
/// unauthenticated plaintext is left when the call returns.
///
/// Why the ciphertext and not zeros: a forgery, or a wrong key, nonce or associated data, must
/// not destroy the caller's data. The caller can try another key on the same buffer (a key
/// rotation, a keyring), as with `aes-gcm`, which checks before it decrypts; the price is a
/// second keystream pass, paid only for a refused message.
///
/// The paths that apply it: the framing's [`open`](crate::backend::open) and
/// [`open_batch`](crate::backend::open_batch) (all of `gcmx::Gcm`), the typed `AeadInOut` API in
/// place, [`Refused::apply`] for a backend that compares tags on its own entry points (gcmx-cuda's
/// keyring host batches, which seal refused messages again on the device), and gcmx-cuda's device
/// kernels, whose last phase applies the keystream of a refused message again on the device.
///
/// ```
/// use gcmx_core::{Error, backend::{KeyedEngine, SerialEngine, open, seal}};
/// let keyed = KeyedEngine::new(&[3u8; 16], |_| Ok(Box::new(SerialEngine)))?;
/// let mut buf = *b"attack at dawn";
/// let mut tag = [0u8; 16];
/// seal(&keyed, &[1u8; 12], b"", &mut buf, &mut tag)?;
/// let ciphertext = buf;
/// tag[0] ^= 1; // forged
/// assert_eq!(open(&keyed, &[1u8; 12], b"", &mut buf, &tag), Err(Error::Authentication));
/// assert_eq!(buf, ciphertext); // Refused::Restored
/// # Ok::<(), gcmx_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The buffer holds the ciphertext it was given.
    Restored,
    /// Applying the keystream again failed: the buffer is zeroed.
    Zeroed,
}

impl Refused {
    /// The policy, once for every path: `again` applies the keystream of each refused buffer of
    /// `bufs` a second time (by sealing them again: CTR is its own inverse); if it fails, `wipe`
    /// zeroes them all. For a backend that opens and compares tags on its own entry points
    /// (gcmx-cuda's keyring host batches); the framing applies it itself.
    ///
    /// ```
    /// use gcmx_core::backend::Refused;
    /// let mut bufs = [vec![1u8, 2], vec![3]];
    /// let failed = Refused::apply(&mut bufs, |_| Err(gcmx_core::Error::Authentication), |b| {
    ///     b.iter_mut().for_each(|v| v.fill(0))
    /// });
    /// assert_eq!(failed, Refused::Zeroed);
    /// assert_eq!(bufs, [vec![0, 0], vec![0]]);
    /// ```
    pub fn apply<B: ?Sized>(
        bufs: &mut B,
        again: impl FnOnce(&mut B) -> Result<(), Error>,
        wipe: impl FnOnce(&mut B),
    ) -> Refused {
        match again(bufs) {
            Ok(()) => Refused::Restored,
            Err(_) => {
                wipe(bufs);
                Refused::Zeroed
            }
        }
    }

    /// [`Refused::apply`] to messages the framing opened with `engine`.
    pub(crate) fn messages(engine: &dyn GcmEngine, msgs: &mut [Message<'_>]) -> Refused {
        let mut tags = vec![[0u8; 16]; msgs.len()];
        let r = Refused::apply(
            msgs,
            |m| engine.crypt_batch(Direction::Seal, m, &mut tags),
            |m| m.iter_mut().for_each(Message::wipe),
        );
        tags.zeroize();
        r
    }
}
