//! One AES key with its GHASH key: the fused CTR+GHASH loops of the CPU backends, generic over any
//! RustCrypto block cipher with 16-byte blocks.
//!
//! Two paths run those loops. For AES keyed from its raw bytes ([`Cipher::with_key`]) on an
//! x86-64 CPU with AES-NI and PCLMULQDQ, the stitched kernels of `gcmx-x86` (AES rounds and
//! carry-less multiplies interleaved in one loop; 256-bit VAES + VPCLMULQDQ where the CPU has
//! them, 128-bit otherwise), on an aarch64 core with AES and PMULL those of `gcmx-aarch64`
//! (the same interface); elsewhere the generic path, the block
//! cipher's own CTR backend and the `ghash` crate. The path is chosen in one place,
//! `Cipher::hasher`; every loop below is written once for both.

use aead::inout::InOutBuf;
use aes::cipher::{Block, BlockCipherEncrypt, BlockSizeUser, consts::U16};
// The stitched kernels of this architecture: the two crates have one interface.
#[cfg(target_arch = "aarch64")]
use gcmx_aarch64::StitchedKey;
#[cfg(not(target_arch = "aarch64"))]
use gcmx_x86::StitchedKey;
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use rayon::prelude::*;

use zeroize::Zeroize;

use crate::combine::{Partial, tree_reduce};
use crate::ctr::apply_keystream;
use crate::direction::Direction;
use crate::field::HashKey;
use crate::tag::tag_matches;
use crate::wipe::wipe16;

/// Bytes per step of the serial loop: CTR over a chunk, then GHASH over it while it is in L1/L2
/// (measured: 8 KiB to 128 KiB are equal within 0.5 %; below 2 KiB the per-chunk setup costs).
pub(crate) const SERIAL_CHUNK: usize = 32 * 1024;

/// Smallest chunk the parallel backend hands to one thread.
pub(crate) const MIN_PARALLEL_CHUNK: usize = 16 * 1024;

/// The buffers of a parallel run ([`Cipher::crypt_parallel`]).
#[derive(Debug)]
pub(crate) enum Io<'i, 'o> {
    /// One buffer, worked in place.
    InPlace(&'o mut [u8]),
    /// An input and an output apart, of equal length: each chunk is read from the input once
    /// and written only to the output.
    Apart(&'i [u8], &'o mut [u8]),
    /// As [`Io::Apart`], an open's output written past the caches where the stitched kernels
    /// run ([`Cipher::open_uncached`]); a seal's as `Apart`.
    ApartUncached(&'i [u8], &'o mut [u8]),
}

/// Whether this CPU runs gcmx's stitched AES-GCM kernels (gcmx-x86's on x86-64 with AES-NI and
/// PCLMULQDQ, gcmx-aarch64's on aarch64 with AES and PMULL):
/// then AES keyed from raw bytes ([`KeyMaterial::new`](crate::backend::KeyMaterial::new), the
/// typed API's `KeyInit`) takes that path.
///
/// ```
/// let _fast = gcmx_core::backend::stitched_supported();
/// ```
pub fn stitched_supported() -> bool {
    StitchedKey::cpu_supported()
}

/// A block cipher keyed once, with `H = E_K(0)` as the POLYVAL-domain [`HashKey`] that joins
/// partial hashes, and the loops of one of two paths: the stitched kernels (AES keyed from its
/// raw bytes, [`Cipher::with_key`] and [`Cipher::aes`]), or the block cipher itself with the
/// `ghash` crate's hasher.
///
/// Private to gcmx-core: it encrypts raw blocks and opens without checking the tag, which only
/// the typed API and the engines, behind the framing, may do.
#[derive(Clone)]
pub(crate) struct Cipher<C> {
    path: Path<C>,
}

/// Which loops a [`Cipher`] runs, with what that path needs: the stitched kernels' key alone
/// (the block cipher is not kept: the kernels do all it would; `H'` is read from the key's table
/// when asked for), or the block cipher, the `ghash` crate's hasher and the hash key. A cipher is
/// this enum alone, two words, which a key's constructor returns in two registers. (With the
/// hash key beside it, a cipher was a `u128` and two words returned through memory: a move of it
/// could read 16 bytes that two 8-byte stores had just written, a load that takes nothing from
/// either store and waits until every store of the key's set-up has reached the cache; see
/// benches/results.md.) The generic path's part is boxed so that the enum is two words: held
/// inline, the stitched variant would leave most of the enum as uninitialized bytes, which every
/// move of a cipher (into a `Box`, a clone) copies as they are, and those bytes come from stack
/// that the key's expansion has just used (round keys were found in a freed `Box` of a typed
/// key).
#[derive(Clone)]
enum Path<C> {
    Stitched(StitchedKey),
    Generic(Box<Generic<C>>),
}

/// The generic path's block cipher and hasher.
#[derive(Clone)]
struct Generic<C> {
    cipher: C,
    ghash: GHash,
    hk: HashKey,
}

/// The key length of `C` when `C` is one of the `aes` crate's AES types (compared by type
/// identity), which [`Cipher::aes`] keys on the stitched kernels without making them: the kernels
/// compute the same AES (the tests compare them on every path).
fn known_aes_key_len<C: ?Sized>() -> Option<usize> {
    // `typeid::of` rather than `TypeId::of`: the typed API's cipher parameter need not be
    // `'static` (as in `aes-gcm`).
    let c = typeid::of::<C>();
    [
        (typeid::of::<aes::Aes128>(), 16),
        (typeid::of::<aes::Aes192>(), 24),
        (typeid::of::<aes::Aes256>(), 32),
    ]
    .into_iter()
    .find_map(|(t, len)| (t == c).then_some(len))
}

/// A running GHASH state on one of the two paths ([`Cipher::hasher`] picks which).
#[derive(Clone)]
enum Hasher<'a> {
    /// The `ghash` crate.
    Generic(GHash),
    /// The stitched kernels; the state as a POLYVAL-domain `u128`.
    Stitched(&'a StitchedKey, u128),
}

impl Hasher<'_> {
    /// Absorb `data`, zero-padded to whole blocks.
    #[inline]
    fn update_padded(&mut self, data: &[u8]) {
        match self {
            Hasher::Generic(g) => g.update_padded(data),
            Hasher::Stitched(k, y) => k.ghash(y, data),
        }
    }

    /// The state, as a GHASH block read big-endian.
    #[inline]
    fn finalize(self) -> u128 {
        match self {
            Hasher::Generic(g) => u128::from_be_bytes(g.finalize().into()),
            Hasher::Stitched(_, y) => y,
        }
    }
}

impl<C> Cipher<C>
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    /// Derive `H = E_K(0^128)` and set up the hasher: the generic path (the raw key is not
    /// known here); [`Cipher::with_key`] can use the stitched kernels.
    pub(crate) fn new(cipher: C) -> Self {
        let mut h = Block::<C>::default();
        cipher.encrypt_block(&mut h);
        let mut hb = [0u8; 16];
        hb.copy_from_slice(&h);
        h.as_mut_slice().zeroize();
        let hk = HashKey::new(hb);
        let ghash = GHash::new(&hb.into());
        hb.zeroize();
        Cipher {
            path: Path::Generic(Box::new(Generic { cipher, ghash, hk })),
        }
    }

    /// Like [`Cipher::new`], but where the CPU has AES-NI and PCLMULQDQ and `key` is the AES
    /// key `cipher` was made from (16, 24 or 32 bytes), the stitched x86-64 kernels (see
    /// `gcmx_x86::StitchedKey::new`), and `cipher` is dropped. The kernels are used only if
    /// their AES agrees with `cipher` on two test blocks, so a cipher that is not AES under
    /// `key` keeps the generic path.
    pub(crate) fn with_key(cipher: C, key: &[u8]) -> Self {
        if let Some(k) = StitchedKey::new(key) {
            let mut h = [0u8; 16];
            k.encrypt_block(&mut h);
            let same = agrees(&cipher, &k, &h);
            let c = same.then(|| Self::from_stitched(k));
            h.zeroize();
            if let Some(c) = c {
                return c;
            }
        }
        Self::new(cipher)
    }

    /// AES under its raw key `key` on the stitched kernels, the block cipher never made (no
    /// check needed: `C` is one of the `aes` crate's AES types and `key` its length); `None`
    /// where `C` is another type, `key` is not `C`'s length or the CPU lacks the kernels.
    pub(crate) fn aes(key: &[u8]) -> Option<Self> {
        if known_aes_key_len::<C>() != Some(key.len()) {
            return None;
        }
        StitchedKey::new(key).map(Self::from_stitched)
    }

    /// The stitched kernels' cipher (its hash key the one the kernels' key holds).
    fn from_stitched(k: StitchedKey) -> Self {
        Cipher {
            path: Path::Stitched(k),
        }
    }

    /// Whether this cipher runs the stitched x86-64 kernels (else the generic path).
    pub(crate) fn is_stitched(&self) -> bool {
        self.stitched().is_some()
    }

    /// The stitched kernels' key, where this cipher runs them.
    #[inline(always)]
    pub(crate) fn stitched(&self) -> Option<&StitchedKey> {
        match &self.path {
            Path::Stitched(k) => Some(k),
            Path::Generic(_) => None,
        }
    }

    /// The generic path's block cipher and hasher, where this cipher runs it.
    #[inline(always)]
    fn generic(&self) -> Option<&Generic<C>> {
        match &self.path {
            Path::Stitched(_) => None,
            Path::Generic(g) => Some(g),
        }
    }

    /// A GHASH state at zero on this cipher's path: the one place the path is chosen.
    #[inline]
    fn hasher(&self) -> Hasher<'_> {
        match &self.path {
            Path::Stitched(k) => Hasher::Stitched(k, 0),
            Path::Generic(g) => Hasher::Generic(g.ghash.clone()),
        }
    }

    /// The POLYVAL-domain hash key: on the stitched kernels, `Q_1` of the kernels' key.
    pub(crate) fn hash_key(&self) -> HashKey {
        match &self.path {
            Path::Stitched(k) => HashKey::from_h_prime(k.h_prime()),
            Path::Generic(g) => g.hk.clone(),
        }
    }

    /// `E_K(block)` in place.
    pub(crate) fn encrypt_block(&self, block: &mut [u8; 16]) {
        match &self.path {
            Path::Stitched(k) => k.encrypt_block(block),
            Path::Generic(g) => {
                let mut b = Block::<C>::from(*block);
                g.cipher.encrypt_block(&mut b);
                *block = b.into();
                b.as_mut_slice().zeroize();
            }
        }
    }

    /// The pre-counter block J0 of SP 800-38D 7.1: `IV ‖ 0^31 ‖ 1` for 12-byte nonces, else
    /// `GHASH(IV ‖ 0^s ‖ [len(IV)]_64)`. The nonce is public; `nonce` must not be empty (the framing checks).
    #[inline]
    pub(crate) fn j0(&self, nonce: &[u8]) -> [u8; 16] {
        if nonce.len() == 12 {
            let mut j0 = [0u8; 16];
            j0[..12].copy_from_slice(nonce);
            j0[15] = 1;
            return j0;
        }
        self.j0_hashed(nonce)
    }

    /// J0 of a nonce that is not 12 bytes long: `GHASH(IV ‖ 0^s ‖ [len(IV)]_64)`.
    #[inline(never)]
    fn j0_hashed(&self, nonce: &[u8]) -> [u8; 16] {
        let mut g = self.hasher();
        g.update_padded(nonce);
        let mut len = [0u8; 16];
        len[8..].copy_from_slice(&((nonce.len() as u64) * 8).to_be_bytes());
        g.update_padded(&len);
        g.finalize().to_be_bytes()
    }

    /// [`Cipher::crypt_inout`] in place (tests).
    #[cfg(test)]
    pub(crate) fn crypt(
        &self,
        dir: Direction,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut [u8],
    ) -> [u8; 16] {
        self.crypt_inout(dir, j0, aad, buf.into())
    }

    /// Seal or open from `buf`'s input into its output (in place, or another buffer: the
    /// stitched kernels then read the input once and write only the output; the generic path
    /// copies the input over first) on one thread; returns the full tag (computed over the
    /// ciphertext written when sealing, over the ciphertext read when opening). Not inlined: the
    /// callers' fast path (a 12-byte nonce on the stitched kernels) then carries none of its
    /// stack frame.
    #[inline(never)]
    pub(crate) fn crypt_inout(
        &self,
        dir: Direction,
        j0: &[u8; 16],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        if let Some(k) = self.stitched() {
            // The whole message (AAD, data, length block, mask) in one kernel call.
            return match dir {
                Direction::Seal => k.seal_message(j0, aad, buf),
                Direction::Open => k.open_message(j0, aad, buf),
            };
        }
        let len = buf.len();
        let mut g = self.hasher();
        g.update_padded(aad);
        self.fused_run(&mut g, j0, 0, buf, dir);
        self.finish(j0, g, aad.len(), len)
    }

    /// [`Cipher::crypt_inout`] under a nonce: J0 derived from it here, or for a 12-byte nonce
    /// on the stitched kernels, by the kernel itself in a register (J0 is then never written to
    /// memory and read back).
    #[inline(always)]
    pub(crate) fn crypt_nonce(
        &self,
        dir: Direction,
        nonce: &[u8],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        if let (Some(k), Ok(n)) = (self.stitched(), <&[u8; 12]>::try_from(nonce)) {
            return stitched96(k, dir, n, aad, buf);
        }
        self.crypt_nonce_slow(dir, nonce, aad, buf)
    }

    /// [`Cipher::crypt_nonce_j0`] as one call: the fast path's callers then carry none of the
    /// J0 derivation's code or stack.
    #[inline(never)]
    fn crypt_nonce_slow(
        &self,
        dir: Direction,
        nonce: &[u8],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        self.crypt_nonce_j0(dir, nonce, aad, buf)
    }

    /// [`Cipher::crypt_nonce`] off its fast path: J0 derived here, written to memory.
    #[inline(always)]
    pub(crate) fn crypt_nonce_j0(
        &self,
        dir: Direction,
        nonce: &[u8],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        let mut j0 = self.j0(nonce);
        let full = self.crypt_inout(dir, &j0, aad, buf);
        wipe16(&mut j0);
        full
    }

    /// Open `buf` under `nonce` on one thread and compare the expected tag with the received
    /// `tag` in constant time: whether it matches. On a mismatch the output holds
    /// unauthenticated plaintext, for the caller to restore or wipe; the expected tag is never
    /// released: for a 12-byte nonce on the stitched kernels it stays in the kernel's registers
    /// (compared there, a few instructions instead of a store, a reload and a comparison
    /// here), elsewhere it is wiped.
    #[inline(always)]
    pub(crate) fn open_nonce(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
        tag: &[u8],
    ) -> bool {
        if let (Some(k), Ok(n)) = (self.stitched(), <&[u8; 12]>::try_from(nonce)) {
            return k.open_message96_checked(n, aad, buf, tag);
        }
        self.open_nonce_slow(nonce, aad, buf, tag)
    }

    /// [`Cipher::open_nonce_j0`] as one call, as [`Cipher::crypt_nonce_slow`].
    #[inline(never)]
    fn open_nonce_slow(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
        tag: &[u8],
    ) -> bool {
        self.open_nonce_j0(nonce, aad, buf, tag)
    }

    /// [`Cipher::open_nonce`] off its fast path: the expected tag returned by
    /// [`Cipher::crypt_nonce_j0`], compared here and wiped.
    #[inline(always)]
    pub(crate) fn open_nonce_j0(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
        tag: &[u8],
    ) -> bool {
        let mut expected = self.crypt_nonce_j0(Direction::Open, nonce, aad, buf);
        let ok = tag_matches(&expected, tag);
        wipe16(&mut expected);
        ok
    }

    /// [`Cipher::crypt_inout`] of a message whose J0 is `j0`, built from the 12-byte `nonce96`
    /// when that is given: the stitched kernels then build J0 from the nonce, as
    /// [`Cipher::crypt_nonce`] has them do.
    #[inline(always)]
    pub(crate) fn crypt_j0(
        &self,
        dir: Direction,
        j0: &[u8; 16],
        nonce96: Option<&[u8; 12]>,
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        match (self.stitched(), nonce96) {
            (Some(k), Some(n)) => stitched96(k, dir, n, aad, buf),
            _ => self.crypt_inout(dir, j0, aad, buf),
        }
    }

    /// Open `src` into `dst` (equal lengths) on one thread, the plaintext written to memory past
    /// the caches (non-temporal stores) where the stitched kernels run, as
    /// [`Cipher::crypt_inout`] elsewhere; the expected tag, or `None` when the lengths differ.
    pub(crate) fn open_uncached(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<[u8; 16]> {
        match self.stitched() {
            Some(k) => k.open_message_uncached(j0, aad, src, dst),
            None => InOutBuf::new(src, dst)
                .ok()
                .map(|b| self.crypt_inout(Direction::Open, j0, aad, b)),
        }
    }

    /// XOR the keystream from block `first` of the message whose J0 is `j0` into `buf`, alone
    /// (no hash): the `hazmat` feature's `apply_keystream`.
    #[cfg(feature = "hazmat")]
    pub(crate) fn apply_keystream(&self, j0: &[u8; 16], first: u64, buf: &mut [u8]) {
        match &self.path {
            Path::Stitched(k) => {
                // The kernels' sealing pass is this keystream XORed in; its hash is dropped.
                let mut ctr = crate::counter::Counter::block(j0, first);
                let mut y = 0u128;
                k.seal(&ctr, &mut y, buf);
                y.zeroize();
                ctr.zeroize();
            }
            Path::Generic(g) => apply_keystream(&g.cipher, j0, first, buf),
        }
    }

    /// The full tag of ciphertext `ct` under `j0` and `aad`, without decrypting: what an open
    /// of `ct` expects (for callers whose output is not their input buffer).
    pub(crate) fn tag_of(&self, j0: &[u8; 16], aad: &[u8], ct: &[u8]) -> [u8; 16] {
        let mut g = self.hasher();
        g.update_padded(aad);
        g.update_padded(ct);
        self.finish(j0, g, aad.len(), ct.len())
    }

    /// The fused loop every CPU path runs. `buf` starts at keystream block `first`. Stitched:
    /// one kernel call, AES-CTR and GHASH of the ciphertext interleaved, from `buf`'s input into
    /// its output. Generic: the input copied to the output, then per [`SERIAL_CHUNK`], CTR then
    /// GHASH of the ciphertext (seal), or GHASH of the ciphertext then CTR (open).
    #[inline]
    fn fused_run(
        &self,
        g: &mut Hasher<'_>,
        j0: &[u8; 16],
        first: u64,
        buf: InOutBuf<'_, '_, u8>,
        dir: Direction,
    ) {
        let (g, cipher) = match (g, self.generic()) {
            (Hasher::Stitched(k, y), _) => {
                let mut ctr = crate::counter::Counter::block(j0, first);
                match dir {
                    Direction::Seal => k.seal(&ctr, y, buf),
                    Direction::Open => k.open(&ctr, y, buf),
                }
                ctr.zeroize();
                return;
            }
            (Hasher::Generic(g), Some(p)) => (g, &p.cipher),
            // a generic hasher comes only from a generic path
            (Hasher::Generic(_), None) => return,
        };
        let buf = buf.into_out_with_copied_in();
        let mut block = first;
        for chunk in buf.chunks_mut(SERIAL_CHUNK) {
            match dir {
                Direction::Seal => {
                    apply_keystream(cipher, j0, block, chunk);
                    g.update_padded(chunk);
                }
                Direction::Open => {
                    g.update_padded(chunk);
                    apply_keystream(cipher, j0, block, chunk);
                }
            }
            block += (SERIAL_CHUNK / 16) as u64;
        }
    }

    /// [`Cipher::fused_run`] opening `src` into `dst` (equal lengths), the output written past
    /// the caches where the stitched kernels run.
    #[inline]
    fn fused_open_uncached(
        &self,
        g: &mut Hasher<'_>,
        j0: &[u8; 16],
        first: u64,
        src: &[u8],
        dst: &mut [u8],
    ) {
        if let Hasher::Stitched(k, y) = g {
            let mut ctr = crate::counter::Counter::block(j0, first);
            k.open_uncached(&ctr, y, src, dst);
            ctr.zeroize();
        } else if let Ok(buf) = InOutBuf::new(src, dst) {
            self.fused_run(g, j0, first, buf, Direction::Open);
        }
    }

    fn finish(&self, j0: &[u8; 16], mut g: Hasher<'_>, aad_len: usize, ct_len: usize) -> [u8; 16] {
        g.update_padded(&length_block(aad_len, ct_len));
        let mut s = g.finalize();
        let tag = self.mask(j0, s);
        s.zeroize();
        tag
    }

    /// Tag = S XOR E_K(J0).
    fn mask(&self, j0: &[u8; 16], s: u128) -> [u8; 16] {
        let mut m = *j0;
        self.encrypt_block(&mut m);
        let tag = (s ^ u128::from_be_bytes(m)).to_be_bytes();
        m.zeroize();
        tag
    }

    /// The GHASH value of one run of bytes (zero-padded to whole blocks) as a [`Partial`].
    pub(crate) fn hash_run(&self, data: &[u8]) -> Partial {
        let mut g = self.hasher();
        g.update_padded(data);
        Partial {
            value: g.finalize(),
            blocks: data.len().div_ceil(16) as u64,
        }
    }

    /// Join the hash of the associated data, the ciphertext runs (in order) and the length
    /// block through [`tree_reduce`], then mask: the full tag. Shared by every parallel backend.
    pub(crate) fn tag_from_partials(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        ct: &[Partial],
        ct_len: usize,
    ) -> [u8; 16] {
        let mut parts = Vec::with_capacity(ct.len() + 2);
        parts.push(self.hash_run(aad));
        parts.extend_from_slice(ct);
        let len = u128::from_be_bytes(length_block(aad.len(), ct_len));
        let hk = self.hash_key();
        parts.push(Partial {
            value: hk.absorb(0, len),
            blocks: 1,
        });
        let mut s = tree_reduce(&hk, &parts).value;
        for p in parts.iter_mut() {
            p.value.zeroize();
        }
        let tag = self.mask(j0, s);
        s.zeroize();
        tag
    }
}

/// A whole message under a 12-byte nonce on the stitched kernels. Inlined down to the kernel's
/// one call (see `gcmx_x86`'s `message`): every layer of calls costs a short message.
#[inline(always)]
pub(crate) fn stitched96(
    k: &StitchedKey,
    dir: Direction,
    nonce: &[u8; 12],
    aad: &[u8],
    buf: InOutBuf<'_, '_, u8>,
) -> [u8; 16] {
    match dir {
        Direction::Seal => k.seal_message96(nonce, aad, buf),
        Direction::Open => k.open_message96(nonce, aad, buf),
    }
}

/// Chunk size the parallel backend uses for `len` bytes: about four chunks per thread, at
/// least 16 KiB, a whole number of blocks.
pub fn parallel_chunk(len: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let c = len.div_ceil(threads * 4).max(MIN_PARALLEL_CHUNK);
    c.div_ceil(16) * 16
}

impl<C> Cipher<C>
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16> + Sync,
{
    /// Seal or open over chunks of `chunk` bytes (rounded down to whole blocks, at least one)
    /// on rayon's threads: each chunk is CTR-processed from its own counter offset and hashed
    /// alone; the hashes join by the powers-of-H tree. Same output as [`Cipher::crypt`]. With
    /// [`Io::Apart`] each chunk goes from the input to the output in one pass (of lengths that
    /// differ, which callers rule out, only the common prefix would be processed).
    pub(crate) fn crypt_parallel(
        &self,
        dir: Direction,
        j0: &[u8; 16],
        aad: &[u8],
        io: Io<'_, '_>,
        chunk: usize,
    ) -> [u8; 16] {
        let chunk = chunk.max(16) / 16 * 16;
        let first = |i: usize| (i * (chunk / 16)) as u64;
        let partial = |g: Hasher<'_>, len: usize| Partial {
            value: g.finalize(),
            blocks: len.div_ceil(16) as u64,
        };
        let run = |i: usize, c: InOutBuf<'_, '_, u8>| {
            let (mut g, len) = (self.hasher(), c.len());
            self.fused_run(&mut g, j0, first(i), c, dir);
            partial(g, len)
        };
        // Only an open's output goes past the caches (`ApartUncached` is an open's request).
        let uncached = matches!((&io, dir), (Io::ApartUncached(..), Direction::Open));
        let (ct_len, mut parts): (usize, Vec<Partial>) = match io {
            Io::InPlace(buf) => (
                buf.len(),
                buf.par_chunks_mut(chunk)
                    .enumerate()
                    .map(|(i, c)| run(i, c.into()))
                    .collect(),
            ),
            Io::Apart(src, dst) | Io::ApartUncached(src, dst) => {
                let n = src.len().min(dst.len());
                let parts = src[..n]
                    .par_chunks(chunk)
                    .zip(dst[..n].par_chunks_mut(chunk))
                    .enumerate()
                    .map(|(i, (s, d))| {
                        if uncached {
                            let mut g = self.hasher();
                            self.fused_open_uncached(&mut g, j0, first(i), s, d);
                            return partial(g, s.len());
                        }
                        // Chunks of equal-length slices pair up with equal lengths, so `new`
                        // does not fail; the empty run stands in for the case that cannot occur.
                        InOutBuf::new(s, d).map_or(Partial::EMPTY, |c| run(i, c))
                    })
                    .collect();
                (n, parts)
            }
        };
        let tag = self.tag_from_partials(j0, aad, &parts, ct_len);
        for p in parts.iter_mut() {
            p.value.zeroize();
        }
        tag
    }
}

/// Whether the stitched kernels' AES equals `cipher` on two blocks, `0^128` (whose image `h`
/// under the kernels the caller has) and `1^128`, both through `cipher` in one call (a call can
/// cost more than a block, as where the `aes` crate first broadcasts its round keys into 512-bit
/// registers). Compared in constant time; temporaries wiped.
fn agrees<C>(cipher: &C, k: &StitchedKey, h: &[u8; 16]) -> bool
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    use subtle::ConstantTimeEq;
    let mut c = [0xFFu8; 16];
    k.encrypt_block(&mut c);
    let mut b = [Block::<C>::from([0; 16]), Block::<C>::from([0xFF; 16])];
    cipher.encrypt_blocks(&mut b);
    // both differences at once, folded to one word and tested for zero without a branch (byte by
    // byte, `subtle` puts each of 32 bytes through an optimisation barrier)
    let mut bb = [[0u8; 16]; 2];
    for (x, y) in bb.iter_mut().zip(b.iter()) {
        x.copy_from_slice(y);
    }
    let d = (u128::from_ne_bytes(*h) ^ u128::from_ne_bytes(bb[0]))
        | (u128::from_ne_bytes(c) ^ u128::from_ne_bytes(bb[1]));
    let same = ((d as u64) | (d >> 64) as u64).ct_eq(&0);
    c.zeroize();
    bb.zeroize();
    for x in b.iter_mut() {
        x.as_mut_slice().zeroize();
    }
    same.into()
}

/// GCM's last GHASH block: `[len(A)]_64 ‖ [len(C)]_64` in bits.
pub(crate) fn length_block(aad_len: usize, ct_len: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&((aad_len as u64) * 8).to_be_bytes());
    b[8..].copy_from_slice(&((ct_len as u64) * 8).to_be_bytes());
    b
}

impl<C> core::fmt::Debug for Cipher<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Cipher { .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::KeyInit;
    use aes::{Aes128, Aes192, Aes256};

    /// Seal and open one block on the stitched and the generic path: the open gives the
    /// plaintext and the seal's tag, and both paths give the same bytes.
    #[test]
    fn seal_open_and_paths_agree_on_one_block() {
        let key = [0u8; 16];
        let c = Cipher::with_key(Aes128::new(&key.into()), &key);
        let mut buf = *b"sixteen byte msg";
        let j0 = c.j0(&[0u8; 12]);
        let tag = c.crypt(Direction::Seal, &j0, b"", &mut buf);
        let mut back = buf;
        assert_eq!(c.crypt(Direction::Open, &j0, b"", &mut back), tag);
        assert_eq!(&back, b"sixteen byte msg");
        // the generic path gives the same bytes
        let g = Cipher::new(Aes128::new(&key.into()));
        let mut again = *b"sixteen byte msg";
        assert_eq!(g.crypt(Direction::Seal, &j0, b"", &mut again), tag);
        assert_eq!(again, buf);
    }

    /// Every way of keying gives the same hash key as the `aes` crate's `H = AES_K(0)`: the
    /// typed API's and `Gcm`'s (`Cipher::aes`, which takes it from the kernels' key), the
    /// checked one (`Cipher::with_key`) and the generic path; and `Cipher::aes` takes the
    /// stitched kernels only for the `aes` crate's types at their own key length.
    #[test]
    fn hash_keys_agree_and_aes_types_are_recognised() {
        fn h_prime<C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16> + KeyInit>(key: &[u8]) {
            let mut h = Block::<C>::default();
            C::new_from_slice(key).unwrap().encrypt_block(&mut h);
            let want = HashKey::new(h.into()).h_prime();
            let generic = Cipher::new(C::new_from_slice(key).unwrap());
            let checked = Cipher::with_key(C::new_from_slice(key).unwrap(), key);
            assert_eq!(generic.hash_key().h_prime(), want);
            assert_eq!(checked.hash_key().h_prime(), want);
            let known = Cipher::<C>::aes(key);
            assert_eq!(known.is_some(), StitchedKey::cpu_supported());
            if let Some(k) = known {
                assert!(k.is_stitched());
                assert_eq!(k.hash_key().h_prime(), want);
            }
        }
        let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(29) ^ 0x3c).collect();
        h_prime::<Aes128>(&key[..16]);
        h_prime::<Aes192>(&key[..24]);
        h_prime::<Aes256>(&key);
        // not the type's key length, or not one of the `aes` crate's types: never unchecked
        assert!(Cipher::<Aes128>::aes(&key[..24]).is_none());
        assert!(Cipher::<Aes256>::aes(&key[..16]).is_none());
        assert!(Cipher::<aes::Aes128Enc>::aes(&key[..16]).is_none());
    }

    /// splitmix64: deterministic test data.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    /// Both paths for one key: (stitched, generic). The stitched one is asserted to be stitched
    /// whenever the CPU can run the kernels, so these tests never silently compare generic with
    /// generic on such a CPU.
    fn pair<C>(key: &[u8]) -> (Cipher<C>, Cipher<C>)
    where
        C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16> + KeyInit + 'static,
    {
        let s = Cipher::with_key(C::new_from_slice(key).unwrap(), key);
        let g = Cipher::new(C::new_from_slice(key).unwrap());
        assert_eq!(s.is_stitched(), StitchedKey::cpu_supported());
        assert!(!g.is_stitched());
        (s, g)
    }

    fn check_pair<C>(s: &Cipher<C>, g: &Cipher<C>, rng: &mut Rng, len: usize, nonce_len: usize)
    where
        C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16> + Sync,
    {
        let nonce = rng.bytes(nonce_len);
        let n = rng.below(101);
        let aad = rng.bytes(n);
        let pt = rng.bytes(len);
        let j0 = s.j0(&nonce);
        assert_eq!(j0, g.j0(&nonce), "j0, nonce {nonce_len}");
        let (mut a, mut b) = (pt.clone(), pt.clone());
        let ta = s.crypt(Direction::Seal, &j0, &aad, &mut a);
        let tb = g.crypt(Direction::Seal, &j0, &aad, &mut b);
        assert_eq!((&a, ta), (&b, tb), "seal, len {len}");
        assert_eq!(s.hash_run(&a), g.hash_run(&b), "hash_run, len {len}");
        let to = s.crypt(Direction::Open, &j0, &aad, &mut a);
        assert_eq!(to, ta, "open tag, len {len}");
        assert_eq!(a, pt, "open, len {len}");
        // parallel chunks of 1, 3 and 17 blocks, each hashed from zero by its own path
        for chunk in [16, 48, 272] {
            let mut c = pt.clone();
            assert_eq!(
                s.crypt_parallel(Direction::Seal, &j0, &aad, Io::InPlace(&mut c), chunk),
                ta,
                "par tag {len}/{chunk}"
            );
            assert_eq!(c, b, "par ct {len}/{chunk}");
            // apart: the input is left as it was, the output written
            let mut out = vec![0xA5u8; len];
            assert_eq!(
                s.crypt_parallel(Direction::Open, &j0, &aad, Io::Apart(&c, &mut out), chunk),
                ta,
                "par apart tag {len}/{chunk}"
            );
            assert_eq!((&out, &c), (&pt, &b), "par apart {len}/{chunk}");
            out.fill(0x5A);
            assert_eq!(
                g.crypt_parallel(Direction::Open, &j0, &aad, Io::Apart(&c, &mut out), chunk),
                ta,
                "generic par apart tag {len}/{chunk}"
            );
            assert_eq!((&out, &c), (&pt, &b), "generic par apart {len}/{chunk}");
            for (who, x) in [("stitched", &s), ("generic", &g)] {
                out.fill(0x3C);
                let io = Io::ApartUncached(&c, &mut out);
                let t = x.crypt_parallel(Direction::Open, &j0, &aad, io, chunk);
                assert_eq!(t, ta, "{who} par uncached tag {len}/{chunk}");
                assert_eq!((&out, &c), (&pt, &b), "{who} par uncached {len}/{chunk}");
                out.fill(0x3C);
                assert_eq!(x.open_uncached(&j0, &aad, &c, &mut out), Some(ta));
                assert_eq!(out, pt, "{who} uncached {len}");
            }
            assert_eq!(
                s.crypt_parallel(Direction::Open, &j0, &aad, Io::InPlace(&mut c), chunk),
                ta
            );
            assert_eq!(c, pt);
        }
    }

    /// Stitched and generic paths agree byte for byte, tags too, at every length 0..=600 and some
    /// big ones, for the three key sizes, 96-bit and other nonces, serial and parallel.
    #[test]
    fn stitched_equals_generic() {
        let mut rng = Rng(11);
        for len in (0..=600).chain([4096 + 7, 65_536, (1 << 20) + 5]) {
            let nonce_len = if len % 5 == 0 { 1 + rng.below(70) } else { 12 };
            match len % 3 {
                0 => {
                    let (s, g) = pair::<Aes128>(&rng.bytes(16));
                    check_pair(&s, &g, &mut rng, len, nonce_len);
                }
                1 => {
                    let (s, g) = pair::<Aes192>(&rng.bytes(24));
                    check_pair(&s, &g, &mut rng, len, nonce_len);
                }
                _ => {
                    let (s, g) = pair::<Aes256>(&rng.bytes(32));
                    check_pair(&s, &g, &mut rng, len, nonce_len);
                }
            }
        }
    }

    /// J0's counter at 0xFFFFFFF0 and beyond: the keystream crosses 2^32 the same way on both
    /// paths (serial, and parallel chunks that start past the wrap).
    #[test]
    fn counter_wrap_equal_on_both_paths() {
        let mut rng = Rng(12);
        let (s, g) = pair::<Aes256>(&rng.bytes(32));
        for start in [0xFFFF_FFF0u32, 0xFFFF_FFFE, 0xFFFF_FF00] {
            for len in [1usize, 255, 256, 257, 600, 5000] {
                let mut j0 = [0u8; 16];
                j0.copy_from_slice(&rng.bytes(16));
                j0[12..].copy_from_slice(&start.to_be_bytes());
                let pt = rng.bytes(len);
                let (mut a, mut b, mut c) = (pt.clone(), pt.clone(), pt.clone());
                let ta = s.crypt(Direction::Seal, &j0, b"aad", &mut a);
                let tb = g.crypt(Direction::Seal, &j0, b"aad", &mut b);
                let tc = s.crypt_parallel(Direction::Seal, &j0, b"aad", Io::InPlace(&mut c), 64);
                assert_eq!((&a, ta), (&b, tb), "start {start:#x} len {len}");
                assert_eq!((&c, tc), (&b, tb), "parallel, start {start:#x} len {len}");
            }
        }
    }

    /// Only AES keyed with its own raw key gets the kernels.
    #[test]
    fn stitched_only_for_matching_aes_keys() {
        let k32 = [7u8; 32];
        let wrong = Cipher::with_key(Aes256::new_from_slice(&k32).unwrap(), &[8u8; 32]);
        assert!(
            !wrong.is_stitched(),
            "a raw key that is not the cipher's key is refused"
        );
        let short = Cipher::with_key(Aes256::new_from_slice(&k32).unwrap(), &k32[..16]);
        assert!(!short.is_stitched());
        let right = Cipher::with_key(Aes256::new_from_slice(&k32).unwrap(), &k32);
        assert_eq!(right.is_stitched(), StitchedKey::cpu_supported());
        let enc = Cipher::with_key(aes::Aes256Enc::new_from_slice(&k32).unwrap(), &k32);
        assert_eq!(enc.is_stitched(), StitchedKey::cpu_supported());
        let (mut a, mut b) = ([1u8; 100], [1u8; 100]);
        let j0 = right.j0(&[2u8; 12]);
        assert_eq!(
            right.crypt(Direction::Seal, &j0, b"", &mut a),
            enc.crypt(Direction::Seal, &j0, b"", &mut b)
        );
        assert_eq!(a, b);
    }
}
