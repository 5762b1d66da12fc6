//! Every use of `gcmx`: one stream key's AES-GCM in batches (in parallel on the CPU, one GPU
//! call) and, on the CPU, a segment at a time from one buffer into another.

use gcmx::aead::consts::U12;
use gcmx::aead::inout::InOutBuf;
use gcmx::aead::{AeadInOut, KeyInit};

use crate::error::{Error, Result};
use crate::nonce::NONCE_LEN;
use crate::wipe::wipe_this_stack;

pub(crate) use gcmx::{Backend, OpenJob, SealJob};

/// Threads from which an open into a caller's large buffer writes past the caches: that pays
/// only where memory bounds the opens (benches/results.md, 2026-12-04: 16 cores gained, 8, 4
/// and 2 lost).
const UNCACHED_MIN_THREADS: usize = 16;

/// Threads from which a window of few segments per thread splits each open over the threads,
/// so that none waits at the window's end for the last segment (same entry: paid from 4).
const NESTED_MIN_THREADS: usize = 4;

/// An AES-GCM engine for one stream key.
///
/// Its key schedules are on the heap, so moving it copies pointers only; [`Engine::new`] wipes
/// the stack where they were built, and each wipes itself when dropped.
pub(crate) struct Engine {
    gcm: gcmx::Gcm,
    /// The key in gcmx's typed API, on the CPU: it seals and opens from one buffer into another
    /// in one pass, which the batch (in place) cannot.
    apart: Option<Apart>,
}

/// The key in gcmx's typed API, and the variants that pay on many threads (built only there).
struct Apart {
    serial: Serial,
    /// Opens writing past the caches ([`UNCACHED_MIN_THREADS`]).
    uncached: Option<Serial>,
    /// Each open split over rayon's threads ([`NESTED_MIN_THREADS`]).
    nested: Option<Serial>,
}

/// Each key boxed alone: held inline, an empty slot (`None`, or a shorter key's variant) would
/// carry the stack bytes under it, round keys among them, into the heap, where nothing wipes
/// them (gcmx-cli's residue test found a schedule in a freed engine that way).
enum Serial {
    Aes128(Box<gcmx::Aes128Gcm>),
    Aes192(Box<gcmx::Aes192Gcm>),
    Aes256(Box<gcmx::Aes256Gcm>),
}

/// `$e` on the key `$c` of a `Serial`, whatever its size; with `map`, boxed into the same
/// variant.
macro_rules! with_serial {
    (map $s:expr, $c:ident => $e:expr) => {
        match $s {
            Serial::Aes128($c) => Serial::Aes128(Box::new($e)),
            Serial::Aes192($c) => Serial::Aes192(Box::new($e)),
            Serial::Aes256($c) => Serial::Aes256(Box::new($e)),
        }
    };
    ($s:expr, $c:ident => $e:expr) => {
        match $s {
            Serial::Aes128($c) => $e,
            Serial::Aes192($c) => $e,
            Serial::Aes256($c) => $e,
        }
    };
}

impl Serial {
    fn new(key: &[u8]) -> Option<Serial> {
        Some(match key.len() {
            16 => Serial::Aes128(Box::new(gcmx::Aes128Gcm::new_from_slice(key).ok()?)),
            24 => Serial::Aes192(Box::new(gcmx::Aes192Gcm::new_from_slice(key).ok()?)),
            32 => Serial::Aes256(Box::new(gcmx::Aes256Gcm::new_from_slice(key).ok()?)),
            _ => return None,
        })
    }

    /// Seals `src` into the start of `seg` (no associated data), its tag after it.
    fn seal(&self, nonce: &[u8; NONCE_LEN], src: &[u8], seg: &mut [u8]) -> Option<()> {
        let nonce = gcmx::Nonce::<U12>::from(*nonce);
        let (out, tag) = seg.split_at_mut_checked(src.len())?;
        let io = InOutBuf::new(src, out).ok()?;
        let t = with_serial!(self, c => c.encrypt_inout_detached(&nonce, &[], io).ok()?);
        tag.get_mut(..t.len())?.copy_from_slice(&t);
        Some(())
    }

    /// Opens the job `j` in one pass; `false` when the tag does not match. A whole body goes
    /// from the source into `out` (zeroed on a wrong tag); a body whose start is in `out`
    /// already is completed there and opened in place (its ciphertext again on a wrong tag).
    fn open(&self, j: &mut OpenInto<'_>) -> Option<bool> {
        let nonce = gcmx::Nonce::<U12>::from(j.nonce);
        let tag = gcmx::Tag::try_from(j.tag).ok()?;
        let at = j.out.len().checked_sub(j.src.len())?;
        let r = if at == 0 {
            with_serial!(self, c => c.decrypt_into_detached(&nonce, &[], j.src, j.out, &tag))
        } else {
            j.out[at..].copy_from_slice(j.src);
            let buf = InOutBuf::from(&mut *j.out);
            with_serial!(self, c => c.decrypt_inout_detached(&nonce, &[], buf, &tag))
        };
        Some(r.is_ok())
    }
}

/// A segment to open from a source into `out`, as long as its body, whose first
/// `out.len() - src.len()` bytes hold the body's start already (from an earlier fill).
pub(crate) struct OpenInto<'a> {
    pub(crate) nonce: [u8; NONCE_LEN],
    pub(crate) src: &'a [u8],
    pub(crate) out: &'a mut [u8],
    pub(crate) tag: &'a [u8],
}

fn lib_error(e: gcmx::GcmError) -> Error {
    let what = match e {
        gcmx::GcmError::BackendUnavailable(_) => "backend unavailable",
        _ => "AES-GCM failed",
    };
    Error::gcm(what, e)
}

/// Whether a decryption authenticated: `Ok(false)` on a wrong tag.
fn authenticated(r: std::result::Result<(), gcmx::GcmError>) -> Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(gcmx::GcmError::Authentication) => Ok(false),
        Err(other) => Err(lib_error(other)),
    }
}

fn invalid() -> Error {
    Error::crypto("AES-GCM failed: a segment's nonce, tag or length is invalid")
}

impl Engine {
    /// An engine for `key` on `backend` (`Auto`: the library's own rule).
    pub(crate) fn new(key: &[u8], backend: Backend) -> Result<Engine> {
        // rayon's pool is built at its first use from stack values whose padding carries what lay
        // there, for the process's life: built now, before a kernel can have spilled round keys.
        rayon::current_num_threads();
        let engine = Engine::build(key, backend);
        // The schedules were expanded and moved by value in the frames below this one, which
        // keep those copies until overwritten.
        wipe_this_stack();
        engine
    }

    /// [`Engine::new`] less the wipe: out of line, so that every copy of a schedule lies below
    /// the frame that wipes.
    #[inline(never)]
    fn build(key: &[u8], backend: Backend) -> Result<Engine> {
        let gcm = gcmx::Gcm::with_backend(key, backend).map_err(lib_error)?;
        // `Auto` may send large messages to the GPU: only engines that stay on the CPU go apart.
        let cpu = matches!(gcm.engine_name(), "cpu" | "cpu-parallel" | "auto-cpu");
        let threads = rayon::current_num_threads();
        let apart = Serial::new(key).filter(|_| cpu).map(|serial| {
            let uncached = (threads >= UNCACHED_MIN_THREADS)
                .then(|| with_serial!(map &serial, c => (**c).clone().with_uncached_output()));
            let nested = (threads >= NESTED_MIN_THREADS)
                .then(|| with_serial!(map &serial, c => (**c).clone().with_multicore()));
            Apart {
                serial,
                uncached,
                nested,
            }
        });
        Ok(Engine { gcm, apart })
    }

    /// Whether the engine seals and opens from one buffer into another ([`Engine::seal_into`],
    /// [`Engine::open_into`]): the CPU's.
    pub(crate) fn apart(&self) -> bool {
        self.apart.is_some()
    }

    /// Whether the engine is the GPU's (whose every call costs a transfer and a wait).
    pub(crate) fn on_gpu(&self) -> bool {
        is_gpu(self.gcm.backend())
    }

    /// Seals every job (in parallel or as one GPU batch).
    pub(crate) fn seal_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<()> {
        self.gcm.encrypt_batch(jobs).map_err(lib_error)
    }

    /// Opens every job, all or nothing: `Ok(false)` on a wrong tag, and every buffer holds its
    /// ciphertext again; on any other failure the buffers are zeroed.
    pub(crate) fn open_batch(&self, jobs: &mut [OpenJob<'_>]) -> Result<bool> {
        authenticated(self.gcm.decrypt_batch(jobs))
    }

    /// Opens one message in place; `Ok(false)` when the tag does not match (the buffer then
    /// holds its ciphertext again).
    pub(crate) fn open(&self, nonce: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<bool> {
        authenticated(self.gcm.decrypt_detached(nonce, &[], buf, tag))
    }

    /// Seals one segment from `src` into `seg` (its body, then its tag) on the calling thread,
    /// in one pass. Only where [`Engine::apart`].
    pub(crate) fn seal_into(
        &self,
        nonce: &[u8; NONCE_LEN],
        src: &[u8],
        seg: &mut [u8],
    ) -> Result<()> {
        let apart = self.apart.as_ref().ok_or_else(invalid)?;
        apart.serial.seal(nonce, src, seg).ok_or_else(invalid)
    }

    /// Opens every job on rayon's pool, each from its source into its buffer in one pass: the
    /// position of the first job whose tag does not match, if any. After any failure the other
    /// buffers may hold plaintext (the caller wipes them). Only where [`Engine::apart`].
    /// `uncached` (a buffer too large to stay cached) writes past the caches from
    /// [`UNCACHED_MIN_THREADS`]; few segments per thread split each open from
    /// [`NESTED_MIN_THREADS`].
    pub(crate) fn open_into(
        &self,
        jobs: &mut [OpenInto<'_>],
        uncached: bool,
    ) -> Result<Option<usize>> {
        use rayon::prelude::*;
        let apart = self.apart.as_ref().ok_or_else(invalid)?;
        let threads = rayon::current_num_threads();
        let serial = match (&apart.uncached, &apart.nested) {
            (Some(u), _) if uncached => u,
            (_, Some(n)) if jobs.len() <= 4 * threads => n,
            _ => &apart.serial,
        };
        let opened: Vec<bool> = jobs
            .par_iter_mut()
            .with_max_len(1)
            .map(|j| serial.open(j).ok_or_else(invalid))
            .collect::<Result<_>>()?;
        Ok(opened.iter().position(|&ok| !ok))
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
