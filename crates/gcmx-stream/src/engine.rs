//! Every use of the `gcmx` library by this crate, in one place: the engine for a file key,
//! batch sealing and opening, one-segment sealing and opening.

use gcmx::aead::inout::InOutBuf;
use gcmx::aead::{AeadInOut, KeyInit};

use crate::error::{Error, ErrorKind, Result};
use crate::wipe::wipe_this_stack;

pub(crate) use gcmx::{Backend, OpenJob, SealJob};

/// Threads from which an open into a caller's large buffer writes past the caches. Writing
/// around the caches pays only where the opens, on every core, are held by the memory's speed:
/// on a 16-core host, reads of 1 GiB into one buffer went from 74 to 83-86 % of the in-place
/// batch on 16 threads, and lost on 8 (71 against 66-71 %) and 4 (71 against 62-64 %), where a
/// core's own store rate is the limit (`benches/results.md`).
const UNCACHED_MIN_THREADS: usize = 16;

/// Threads from which a window of few segments per thread splits each segment's open over the
/// threads (the segment's chunks joined by the powers-of-H tree) so that no thread waits at the
/// window's end for the last whole segment: on a 16-core host `fill_buf` went from 80 to 87-90 %
/// of the batch on 16 threads, from 81 to 88 % on 8 and from 66 to 89 % on 4; on 2 threads the
/// split costs more than the wait (80 against 83 %).
const NESTED_MIN_THREADS: usize = 4;

/// An AES-GCM engine for one file key.
///
/// Every key schedule it owns is on the heap (`gcmx::Gcm`'s behind pointers, the serial twins
/// boxed), so moving an engine copies pointers only; [`Engine::new`] wipes the stack where
/// they were built. Each schedule wipes itself when dropped.
pub(crate) struct Engine {
    gcm: gcmx::Gcm,
    /// The same key on one core, where the engine is the CPU's: segments that this crate
    /// sends to rayon's pool itself, each sealed from the caller's bytes into the window, or
    /// opened from the source's buffer, in one task ([`Engine::seal_from`],
    /// [`Engine::open_from`]).
    serial: Option<Box<Serial>>,
    /// The same, writing the plaintext of [`Engine::open_from`] past the caches: for reads
    /// into a caller's buffer too large to stay cached ([`gcmx::Aes256Gcm::with_uncached_output`]).
    uncached: Option<Box<Serial>>,
    /// The same, each segment's open itself split over rayon's threads: for windows of few
    /// segments per thread, whose end would otherwise wait for the last whole segment.
    multicore: Option<Box<Serial>>,
}

/// The file key in gcmx's typed API, on the calling thread: it seals from one buffer into
/// another in one pass (the input read once, only the output written). Wiped on drop.
enum Serial {
    Aes128(gcmx::Aes128Gcm),
    Aes192(gcmx::Aes192Gcm),
    Aes256(gcmx::Aes256Gcm),
}

impl Serial {
    fn new(key: &[u8]) -> Option<Serial> {
        Some(match key.len() {
            16 => Serial::Aes128(gcmx::Aes128Gcm::new_from_slice(key).ok()?),
            24 => Serial::Aes192(gcmx::Aes192Gcm::new_from_slice(key).ok()?),
            32 => Serial::Aes256(gcmx::Aes256Gcm::new_from_slice(key).ok()?),
            _ => return None,
        })
    }

    /// The same key, a large message's chunks on rayon's threads.
    fn multicore(&self) -> Serial {
        match self {
            Serial::Aes128(c) => Serial::Aes128(c.clone().with_multicore()),
            Serial::Aes192(c) => Serial::Aes192(c.clone().with_multicore()),
            Serial::Aes256(c) => Serial::Aes256(c.clone().with_multicore()),
        }
    }

    /// The same key, its opens into another buffer writing past the caches.
    fn uncached(&self) -> Serial {
        match self {
            Serial::Aes128(c) => Serial::Aes128(c.clone().with_uncached_output()),
            Serial::Aes192(c) => Serial::Aes192(c.clone().with_uncached_output()),
            Serial::Aes256(c) => Serial::Aes256(c.clone().with_uncached_output()),
        }
    }

    /// Seals `io` (no associated data) under the 12-byte `nonce`; the 16-byte tag into `tag`.
    fn seal(&self, nonce: &[u8], io: InOutBuf<'_, '_, u8>, tag: &mut [u8]) -> Result<()> {
        fn run<C: AeadInOut>(
            c: &C,
            nonce: &[u8],
            io: InOutBuf<'_, '_, u8>,
            tag: &mut [u8],
        ) -> Option<()> {
            let nonce = gcmx::aead::Nonce::<C>::try_from(nonce).ok()?;
            let t = c.encrypt_inout_detached(&nonce, &[], io).ok()?;
            tag.get_mut(..t.len())?.copy_from_slice(&t);
            Some(())
        }
        let done = match self {
            Serial::Aes128(c) => run(c, nonce, io, tag),
            Serial::Aes192(c) => run(c, nonce, io, tag),
            Serial::Aes256(c) => run(c, nonce, io, tag),
        };
        done.ok_or_else(invalid)
    }

    /// Opens `buf` in place (no associated data) under the 12-byte `nonce` against `tag`:
    /// `Ok(false)` when the tag does not match (`buf` then holds its ciphertext again).
    fn open(&self, nonce: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<bool> {
        fn run<C: AeadInOut>(c: &C, nonce: &[u8], buf: &mut [u8], tag: &[u8]) -> Option<bool> {
            let nonce = gcmx::aead::Nonce::<C>::try_from(nonce).ok()?;
            let tag = gcmx::aead::Tag::<C>::try_from(tag).ok()?;
            Some(
                c.decrypt_inout_detached(&nonce, &[], buf.into(), &tag)
                    .is_ok(),
            )
        }
        let done = match self {
            Serial::Aes128(c) => run(c, nonce, buf, tag),
            Serial::Aes192(c) => run(c, nonce, buf, tag),
            Serial::Aes256(c) => run(c, nonce, buf, tag),
        };
        done.ok_or_else(invalid)
    }

    /// Opens `src` (no associated data) under the 12-byte `nonce` against `tag` into `buf`, of
    /// the same length, in one pass: `Ok(false)` when the tag does not match, or the lengths
    /// differ (`buf` is then zeroed).
    fn open_into(&self, nonce: &[u8], src: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<bool> {
        use gcmx::aead::consts::U12;
        let (Ok(nonce), Ok(tag)) = (
            gcmx::Nonce::<U12>::try_from(nonce),
            gcmx::Tag::try_from(tag),
        ) else {
            return Err(invalid());
        };
        let opened = match self {
            Serial::Aes128(c) => c.decrypt_into_detached(&nonce, &[], src, buf, &tag),
            Serial::Aes192(c) => c.decrypt_into_detached(&nonce, &[], src, buf, &tag),
            Serial::Aes256(c) => c.decrypt_into_detached(&nonce, &[], src, buf, &tag),
        };
        Ok(opened.is_ok())
    }
}

fn invalid() -> Error {
    Error::new(
        ErrorKind::Crypto,
        "AES-GCM failed: a segment's nonce, tag or length is invalid",
    )
}

/// A segment to seal into the window: from `src` into `buf`, or `buf` in place.
pub(crate) struct SealFrom<'a> {
    pub(crate) nonce: &'a [u8],
    /// The plaintext, or `None` when `buf` already holds it.
    pub(crate) src: Option<&'a [u8]>,
    pub(crate) buf: &'a mut [u8],
    pub(crate) tag: &'a mut [u8],
}

fn seal_one_from(serial: &Serial, j: &mut SealFrom<'_>) -> Result<()> {
    let io = match j.src {
        Some(src) => InOutBuf::new(src, &mut *j.buf).map_err(|_| {
            Error::new(
                ErrorKind::Crypto,
                "a segment's source and window differ in length",
            )
        })?,
        None => InOutBuf::from(&mut *j.buf),
    };
    serial.seal(j.nonce, io, j.tag)
}

/// A segment to open in the window or the caller's buffer: its ciphertext's bytes in `src` (a
/// reader's source buffer), of which `buf`'s first `buf.len() - src.len()` bytes already hold
/// the first part (a segment that began in an earlier fill of the source). A whole segment is
/// opened from `src` into `buf` in one pass; a split one is completed in `buf` and opened there.
pub(crate) struct OpenFrom<'a> {
    pub(crate) nonce: &'a [u8],
    pub(crate) src: &'a [u8],
    pub(crate) buf: &'a mut [u8],
    pub(crate) tag: &'a [u8],
}

fn open_one_from(serial: &Serial, j: &mut OpenFrom<'_>) -> Result<bool> {
    let at = j.buf.len().checked_sub(j.src.len()).ok_or_else(|| {
        Error::new(
            ErrorKind::Crypto,
            "a segment's source is longer than its buffer",
        )
    })?;
    if at == 0 {
        // The whole segment is in the source: read once, written once.
        return serial.open_into(j.nonce, j.src, j.buf, j.tag);
    }
    j.buf[at..].copy_from_slice(j.src);
    serial.open(j.nonce, j.buf, j.tag)
}

/// Why opening failed.
pub(crate) enum OpenError {
    /// A tag did not match.
    Authentication,
    /// Anything else (a device failure, a bad length).
    Other(Error),
}

/// The library's error, as this crate's.
fn lib_error(e: gcmx::GcmError) -> Error {
    match e {
        gcmx::GcmError::BackendUnavailable(why) => {
            Error::new(ErrorKind::Crypto, format!("backend unavailable: {why}"))
        }
        other => Error::new(ErrorKind::Crypto, format!("AES-GCM failed: {other}")),
    }
}

impl Engine {
    /// An engine for `key` on `backend`. `Backend::Auto` is the library's own rule (the CPU,
    /// serial or on all cores by message size, and the GPU where the library finds it pays).
    pub(crate) fn new(key: &[u8], backend: Backend) -> Result<Engine> {
        // rayon's global pool is allocated on its first use, from values built on the stack
        // whose padding carries whatever bytes lay there, for the life of the process: made
        // now, before this key has a schedule, rather than by a batch after a kernel has
        // spilled round keys (a wrong key's open, restoring the ciphertext) or by a wipe.
        rayon::current_num_threads();
        let engine = Engine::build(key, backend);
        // The schedules were expanded, and moved into the heap, by value in the frames below
        // this one (the `aes` crate's, `gcmx`'s and `build`'s), which keep those copies until
        // something else overwrites them.
        wipe_this_stack();
        engine
    }

    /// [`Engine::new`] less the wipe: out of line, so that every copy of a schedule made on
    /// the way lies below the frame that wipes.
    #[inline(never)]
    fn build(key: &[u8], backend: Backend) -> Result<Engine> {
        let gcm = gcmx::Gcm::with_backend(key, backend).map_err(lib_error)?;
        // `Auto` may send large messages to the GPU ("auto-offload"): only engines that stay
        // on the CPU get a serial twin.
        let cpu = matches!(gcm.engine_name(), "cpu" | "cpu-parallel" | "auto-cpu");
        let serial = if cpu {
            Serial::new(key).map(Box::new)
        } else {
            None
        };
        let uncached = serial.as_ref().map(|s| Box::new(s.uncached()));
        let multicore = serial.as_ref().map(|s| Box::new(s.multicore()));
        Ok(Engine {
            gcm,
            serial,
            uncached,
            multicore,
        })
    }

    /// Whether [`Engine::seal_from`] and [`Engine::open_from`] run here.
    pub(crate) fn has_serial(&self) -> bool {
        self.serial.is_some()
    }

    /// Seals every job on rayon's pool, each from its source straight into its window buffer in
    /// the task that seals it: the plaintext is read once, by every core instead of the caller's
    /// alone, and never copied. Only where [`Engine::has_serial`]; on failure the buffers
    /// may hold plaintext (the caller wipes them).
    pub(crate) fn seal_from(&self, jobs: &mut [SealFrom<'_>]) -> Result<()> {
        use rayon::prelude::*;
        let serial = self.serial()?;
        jobs.par_iter_mut()
            .with_max_len(1)
            .try_for_each(|j| seal_one_from(serial, j))
    }

    /// Seals one job on the calling thread, from its source into its buffer (or in place), in
    /// one pass. Only where [`Engine::has_serial`].
    pub(crate) fn seal_one_from(&self, job: &mut SealFrom<'_>) -> Result<()> {
        seal_one_from(self.serial()?, job)
    }

    /// Opens every job on rayon's pool, each from its source into its buffer in the task that
    /// opens it: the ciphertext is read once, by every core instead of the caller's alone, and
    /// the plaintext written once. The position of the
    /// first job whose tag does not match, if any. Only where [`Engine::has_serial`]; after a
    /// failure, of any kind, the buffers of other jobs may hold plaintext (the caller wipes
    /// them). With `uncached` (a caller's buffer too large to stay cached) and at least
    /// [`UNCACHED_MIN_THREADS`] threads, the plaintext is written past the caches; a window of
    /// few segments per thread, with at least [`NESTED_MIN_THREADS`], has each segment's open
    /// split over the threads too.
    pub(crate) fn open_from(
        &self,
        jobs: &mut [OpenFrom<'_>],
        uncached: bool,
    ) -> Result<Option<usize>> {
        use rayon::prelude::*;
        let threads = rayon::current_num_threads();
        let serial = match (self.uncached.as_deref(), self.multicore.as_deref()) {
            (Some(u), _) if uncached && threads >= UNCACHED_MIN_THREADS => u,
            (_, Some(m)) if jobs.len() <= 4 * threads && threads >= NESTED_MIN_THREADS => m,
            _ => self.serial()?,
        };
        let opened: Vec<bool> = jobs
            .par_iter_mut()
            .with_max_len(1)
            .map(|j| open_one_from(serial, j))
            .collect::<Result<_>>()?;
        Ok(opened.iter().position(|&ok| !ok))
    }

    fn serial(&self) -> Result<&Serial> {
        self.serial.as_deref().ok_or_else(|| {
            Error::new(
                ErrorKind::Crypto,
                "a seal or open from a buffer asked of an engine without a CPU path",
            )
        })
    }

    /// Whether the engine is the GPU's (whose every call costs a transfer and a wait).
    pub(crate) fn on_gpu(&self) -> bool {
        is_gpu(self.gcm.backend())
    }

    /// The library's name of the engine that runs (for `GCMX_TRACE`).
    pub(crate) fn engine_name(&self) -> &'static str {
        self.gcm.engine_name()
    }

    /// Seals every job (in parallel or as one GPU batch).
    pub(crate) fn seal_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<()> {
        self.gcm.encrypt_batch(jobs).map_err(lib_error)
    }

    /// Opens every job, all or nothing. On a wrong tag every buffer holds its ciphertext again
    /// (so single jobs can be opened again to find the one that failed); on any other failure
    /// the buffers are zeroed.
    pub(crate) fn open_batch(
        &self,
        jobs: &mut [OpenJob<'_>],
    ) -> std::result::Result<(), OpenError> {
        self.gcm.decrypt_batch(jobs).map_err(|e| match e {
            gcmx::GcmError::Authentication => OpenError::Authentication,
            other => OpenError::Other(lib_error(other)),
        })
    }

    /// Opens one message in place; `Ok(false)` when the tag does not match (the buffer then
    /// holds its ciphertext again).
    pub(crate) fn open(&self, nonce: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<bool> {
        match self.gcm.decrypt_detached(nonce, &[], buf, tag) {
            Ok(()) => Ok(true),
            Err(gcmx::GcmError::Authentication) => Ok(false),
            Err(other) => Err(lib_error(other)),
        }
    }

    /// Seals one message in place.
    #[cfg(test)]
    pub(crate) fn seal(&self, nonce: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<()> {
        self.gcm
            .encrypt_detached(nonce, &[], buf, tag)
            .map_err(lib_error)
    }
}

/// Whether `b` is the GPU (it wants larger batches).
pub(crate) fn is_gpu(b: Backend) -> bool {
    #[cfg(feature = "cuda")]
    if b == Backend::Cuda {
        return true;
    }
    let _ = b;
    false
}
