//! Quick differential check of every backend against the `aes-gcm` crate on a few sizes.
use aes_gcm::aead::{AeadInOut, KeyInit};
use gcmx::{Backend, Gcm};

#[test]
fn all_backends_match_aes_gcm() {
    for len in [0usize, 1, 15, 16, 17, 255, 4096, 300_000, 1 << 20] {
        let key = [0x11u8; 32];
        let nonce = [0x22u8; 12];
        let aad = [0x33u8; 40];
        let pt: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let reference = aes_gcm::Aes256Gcm::new(&key.into());
        let mut want = pt.clone();
        let want_tag = reference
            .encrypt_inout_detached(&nonce.into(), &aad, want.as_mut_slice().into())
            .unwrap();
        for backend in [Backend::Cpu, Backend::CpuParallel, Backend::Auto] {
            let gcm = Gcm::with_backend(&key, backend).unwrap();
            let mut buf = pt.clone();
            let mut tag = [0u8; 16];
            gcm.encrypt_detached(&nonce, &aad, &mut buf, &mut tag)
                .unwrap();
            assert_eq!(buf, want, "{backend:?} len {len}");
            assert_eq!(tag.as_slice(), want_tag.as_slice(), "{backend:?} len {len}");
        }
    }
}
