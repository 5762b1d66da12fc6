//! haberdashery (Meta's per-microarchitecture AES-GCM assembly), a peer when its files were beside
//! the repository at build time (build.rs). Its calls read the input and write the output to
//! another buffer; there is no in-place call. Which profiles run is decided per CPU: each file's own
//! `*_is_supported` check, except `tigerlake`, whose check also asks for AVX512-VP2INTERSECT (absent
//! from Sapphire Rapids, Emerald Rapids and Zen 4/5, and unused by its AES-GCM code): it runs where
//! its instructions are present (AVX-512F/BW/VL, VAES, VPCLMULQDQ, AES-NI, AVX2). The benchmark then
//! compares every output with gcmx's before timing.

use crate::peer::{Io, Peer, Place};

/// Room for any profile's key schedule and powers of H (the largest, `sapphirerapids` and `zen4`,
/// declare 384 bytes aligned to 64).
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Ctx([u8; 1024]);

impl Ctx {
    /// Room for a key, zeroed.
    pub(crate) fn new() -> Box<Ctx> {
        Box::new(Ctx([0; 1024]))
    }
}

type Init = unsafe extern "C" fn(*mut Ctx, *const u8, usize) -> i32;
#[rustfmt::skip]
type Crypt = unsafe extern "C" fn(
    *const Ctx, *const u8, usize, *const u8, usize, *const u8, usize, *mut u8, usize, *mut u8, usize,
) -> i32;
#[rustfmt::skip]
type Decrypt = unsafe extern "C" fn(
    *const Ctx, *const u8, usize, *const u8, usize, *const u8, usize, *const u8, usize, *mut u8, usize,
) -> i32;

/// One compiled file: an algorithm tuned for one microarchitecture.
#[derive(Debug)]
pub(crate) struct Profile {
    /// The microarchitecture it is tuned for (`sapphirerapids`, `zen4`, `tigerlake`, ...).
    pub(crate) name: &'static str,
    /// 16 or 32.
    pub(crate) key_len: usize,
    /// The instruction class: 3 for AVX-512 with VAES, 2 for AVX-512 without, 1 for AVX2.
    pub(crate) class: u8,
    init: Init,
    encrypt: Crypt,
    decrypt: Decrypt,
    is_supported: unsafe extern "C" fn() -> i32,
}

impl Profile {
    /// Whether this CPU runs it, and how that was decided.
    pub(crate) fn runs_here(&self) -> Result<&'static str, &'static str> {
        // SAFETY: the check executes CPUID and XGETBV only, which every x86-64 CPU has.
        if unsafe { (self.is_supported)() } != 0 {
            return Ok("its own check");
        }
        if self.name == "tigerlake" && vaes_avx512() {
            return Ok(
                "AVX-512F/BW/VL + VAES + VPCLMULQDQ present (its check also wants VP2INTERSECT)",
            );
        }
        Err("its own check says this CPU lacks its instructions")
    }
}

fn vaes_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("vaes")
        && std::arch::is_x86_feature_detected!("vpclmulqdq")
        && std::arch::is_x86_feature_detected!("aes")
        && std::arch::is_x86_feature_detected!("avx2")
}

macro_rules! profiles {
    ($($cfg:ident: $name:literal, $key_len:literal, $class:literal,
        $init:ident, $enc:ident, $dec:ident, $sup:ident;)*) => {
        /// The profiles compiled in (none when the files were not found at build time).
        pub(crate) fn compiled() -> Vec<&'static Profile> {
            #[allow(unused_mut)]
            let mut v: Vec<&'static Profile> = Vec::new();
            $(
                #[cfg($cfg)]
                {
                    unsafe extern "C" {
                        fn $init(this: *mut Ctx, key: *const u8, key_len: usize) -> i32;
                        #[rustfmt::skip]
                        fn $enc(this: *const Ctx, nonce: *const u8, nonce_len: usize, aad: *const u8,
                            aad_len: usize, pt: *const u8, pt_len: usize, ct: *mut u8, ct_len: usize,
                            tag: *mut u8, tag_len: usize) -> i32;
                        #[rustfmt::skip]
                        fn $dec(this: *const Ctx, nonce: *const u8, nonce_len: usize, aad: *const u8,
                            aad_len: usize, ct: *const u8, ct_len: usize, tag: *const u8,
                            tag_len: usize, pt: *mut u8, pt_len: usize) -> i32;
                        fn $sup() -> i32;
                    }
                    static P: Profile = Profile {
                        name: $name,
                        key_len: $key_len,
                        class: $class,
                        init: $init,
                        encrypt: $enc,
                        decrypt: $dec,
                        is_supported: $sup,
                    };
                    v.push(&P);
                }
            )*
            v
        }
    };
}

profiles! {
    haberdashery_aes128gcm_sapphirerapids: "sapphirerapids", 16, 3,
        haberdashery_aes128gcm_sapphirerapids_init, haberdashery_aes128gcm_sapphirerapids_encrypt,
        haberdashery_aes128gcm_sapphirerapids_decrypt, haberdashery_aes128gcm_sapphirerapids_is_supported;
    haberdashery_aes128gcm_zen4: "zen4", 16, 3,
        haberdashery_aes128gcm_zen4_init, haberdashery_aes128gcm_zen4_encrypt,
        haberdashery_aes128gcm_zen4_decrypt, haberdashery_aes128gcm_zen4_is_supported;
    haberdashery_aes128gcm_tigerlake: "tigerlake", 16, 3,
        haberdashery_aes128gcm_tigerlake_init, haberdashery_aes128gcm_tigerlake_encrypt,
        haberdashery_aes128gcm_tigerlake_decrypt, haberdashery_aes128gcm_tigerlake_is_supported;
    haberdashery_aes128gcm_skylakex: "skylakex", 16, 2,
        haberdashery_aes128gcm_skylakex_init, haberdashery_aes128gcm_skylakex_encrypt,
        haberdashery_aes128gcm_skylakex_decrypt, haberdashery_aes128gcm_skylakex_is_supported;
    haberdashery_aes128gcm_broadwell: "broadwell", 16, 1,
        haberdashery_aes128gcm_broadwell_init, haberdashery_aes128gcm_broadwell_encrypt,
        haberdashery_aes128gcm_broadwell_decrypt, haberdashery_aes128gcm_broadwell_is_supported;
    haberdashery_aes256gcm_tigerlake: "tigerlake", 32, 3,
        haberdashery_aes256gcm_tigerlake_init, haberdashery_aes256gcm_tigerlake_encrypt,
        haberdashery_aes256gcm_tigerlake_decrypt, haberdashery_aes256gcm_tigerlake_is_supported;
    haberdashery_aes256gcm_skylakex: "skylakex", 32, 2,
        haberdashery_aes256gcm_skylakex_init, haberdashery_aes256gcm_skylakex_encrypt,
        haberdashery_aes256gcm_skylakex_decrypt, haberdashery_aes256gcm_skylakex_is_supported;
    haberdashery_aes256gcm_broadwell: "broadwell", 32, 1,
        haberdashery_aes256gcm_broadwell_init, haberdashery_aes256gcm_broadwell_encrypt,
        haberdashery_aes256gcm_broadwell_decrypt, haberdashery_aes256gcm_broadwell_is_supported;
}

/// Where the files came from at build time, or why there are none.
pub(crate) const SOURCE: &str = env!("GCMX_BENCH_HABERDASHERY");

/// One profile under one key.
#[derive(Debug)]
pub(crate) struct Haberdashery {
    ctx: Box<Ctx>,
    profile: &'static Profile,
}

impl Haberdashery {
    /// The key set up by `profile`, which must run on this CPU ([`Profile::runs_here`]).
    pub(crate) fn new(profile: &'static Profile, key: &[u8]) -> Self {
        assert_eq!(key.len(), profile.key_len);
        let mut ctx = Ctx::new();
        assert!(profile.init_into(&mut ctx, key), "{} init", profile.name);
        Haberdashery { ctx, profile }
    }
}

impl Profile {
    /// Its key set-up into `ctx` (no allocation: the caller owns the room).
    pub(crate) fn init_into(&self, ctx: &mut Ctx, key: &[u8]) -> bool {
        assert_eq!(key.len(), self.key_len);
        // SAFETY: `ctx` is writable, 64-byte aligned and larger than any profile's state; `key`
        // is readable for its length; the profile runs on this CPU (checked by the caller).
        unsafe { (self.init)(ctx, key.as_ptr(), key.len()) != 0 }
    }
}

impl Peer for Haberdashery {
    fn places(&self) -> &'static [Place] {
        &[Place::Separate]
    }

    #[inline]
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16] {
        let Io::Separate(pt, ct) = io else {
            unreachable!("haberdashery has no in-place call")
        };
        assert_eq!(pt.len(), ct.len());
        let mut tag = [0u8; 16];
        // SAFETY: every pointer is valid for the length passed with it; `pt` and `ct` are distinct
        // buffers (one shared, one exclusive borrow); the context was set up by this profile.
        let ok = unsafe {
            (self.profile.encrypt)(
                &*self.ctx,
                nonce.as_ptr(),
                12,
                aad.as_ptr(),
                aad.len(),
                pt.as_ptr(),
                pt.len(),
                ct.as_mut_ptr(),
                ct.len(),
                tag.as_mut_ptr(),
                16,
            )
        };
        assert!(ok != 0, "haberdashery {} encrypt", self.profile.name);
        tag
    }

    #[inline]
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool {
        let Io::Separate(ct, pt) = io else {
            unreachable!("haberdashery has no in-place call")
        };
        assert_eq!(pt.len(), ct.len());
        // SAFETY: as in `seal`.
        let ok = unsafe {
            (self.profile.decrypt)(
                &*self.ctx,
                nonce.as_ptr(),
                12,
                aad.as_ptr(),
                aad.len(),
                ct.as_ptr(),
                ct.len(),
                tag.as_ptr(),
                16,
                pt.as_mut_ptr(),
                pt.len(),
            )
        };
        ok != 0
    }
}
