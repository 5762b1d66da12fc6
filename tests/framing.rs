//! The framing and gcmx's forgery policy (`gcmx_core::backend::Refused`), one suite that every
//! backend runs: `Cpu`, `CpuParallel`, `Auto`, and `Cuda` when built with the `cuda` feature on a
//! machine with a device. (gcmx-cuda's own entry points, device-resident and keyring batches,
//! check the same policy in its GPU tests.)
//!
//! What is checked, per backend: inputs are refused before any work, and a refused call leaves
//! its buffers untouched; an open whose tag does not match, for any reason (tag, ciphertext,
//! associated data, nonce or key), returns `Authentication` with the buffer holding exactly the
//! ciphertext it was given, at every tag length and at sizes on both sides of the CPU and GPU
//! thresholds; a batch is all or nothing, and a refused one gives every buffer its ciphertext
//! back; and so another key can be tried on the same buffer (the reason for the policy). The
//! typed API in place and out of place is checked the same way.

mod common;

use common::{TAG_LENGTHS, backends, gcm};
use gcmx::aead::{AeadInOut, KeyInit};
use gcmx::{Aes256Gcm, GcmError, OpenJob, SealJob};

/// Sizes on both sides of the thresholds: a block, the CPU engine's parallel split, the GPU
/// offload and chunking.
const SIZES: &[usize] = &[0, 1, 15, 16, 17, 1000, 65_539, (1 << 20) + 5, (4 << 20) + 1];

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn inputs_are_refused_before_any_work() {
    for b in backends() {
        let g = gcm(&[1u8; 32], b);
        let pt = pattern(100, 1);
        let mut buf = pt.clone();
        let mut tag = [0u8; 16];
        assert_eq!(
            g.encrypt_detached(&[], b"", &mut buf, &mut tag),
            Err(GcmError::NonceLength(0)),
            "{b:?}"
        );
        for bad in [0, 3, 11, 17] {
            let mut t = vec![0u8; bad];
            assert_eq!(
                g.encrypt_detached(&[0; 12], b"", &mut buf, &mut t),
                Err(GcmError::TagLength(bad)),
                "{b:?}: seal with a {bad}-byte tag"
            );
            assert_eq!(
                g.decrypt_detached(&[0; 12], b"", &mut buf, &t),
                Err(GcmError::TagLength(bad)),
                "{b:?}: open with a {bad}-byte tag"
            );
        }
        assert_eq!(buf, pt, "{b:?}: a refused call touched the buffer");
        // One bad job refuses the whole batch before any work.
        let (mut b0, mut b1) = (pt.clone(), pt.clone());
        let (mut t0, mut t1) = ([0u8; 16], [0u8; 16]);
        let r = g.encrypt_batch(&mut [
            SealJob {
                nonce: &[1; 12],
                aad: b"",
                buf: &mut b0,
                tag: &mut t0,
            },
            SealJob {
                nonce: &[],
                aad: b"",
                buf: &mut b1,
                tag: &mut t1,
            },
        ]);
        assert_eq!(r, Err(GcmError::NonceLength(0)), "{b:?}");
        assert!(
            b0 == pt && b1 == pt && t0 == [0; 16],
            "{b:?}: a refused batch did work"
        );
    }
}

/// Seal `pt` under `key`, `nonce`, `aad` on backend `b` with a `tag_len`-byte tag.
fn seal(
    b: gcmx::Backend,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    pt: &[u8],
    tag_len: usize,
) -> (Vec<u8>, Vec<u8>) {
    let mut ct = pt.to_vec();
    let mut tag = vec![0u8; tag_len];
    gcm(key, b)
        .encrypt_detached(nonce, aad, &mut ct, &mut tag)
        .expect("seal");
    (ct, tag)
}

/// One way an open can fail to authenticate: what is wrong, and the engine, nonce, associated data,
/// ciphertext and tag it is given.
type Mismatch<'a> = (
    &'a str,
    &'a gcmx::Gcm,
    &'a [u8],
    &'a [u8],
    &'a [u8],
    &'a [u8],
);

#[test]
fn a_refused_open_gives_the_ciphertext_back() {
    let (key, other) = ([7u8; 32], [8u8; 32]);
    let (nonce, aad) = ([9u8; 12], b"associated".as_slice());
    for b in backends() {
        let g = gcm(&key, b);
        let g_other = gcm(&other, b);
        for &n in SIZES {
            for &tl in TAG_LENGTHS {
                let pt = pattern(n, tl as u8);
                let (ct, tag) = seal(b, &key, &nonce, aad, &pt, tl);
                let mut bad_tag = tag.clone();
                bad_tag[tl - 1] ^= 0x80;
                let mut bad_ct = ct.clone();
                if let Some(x) = bad_ct.get_mut(n / 2) {
                    *x ^= 1;
                }
                let cases: [Mismatch<'_>; 5] = [
                    ("tag", &g, &nonce, aad, &ct, &bad_tag),
                    ("ciphertext", &g, &nonce, aad, &bad_ct, &tag),
                    ("associated data", &g, &nonce, b"associatee", &ct, &tag),
                    ("nonce", &g, &[9u8; 13], aad, &ct, &tag),
                    ("key", &g_other, &nonce, aad, &ct, &tag),
                ];
                for (what, g, nonce, aad, given, tag) in cases {
                    if what == "ciphertext" && n == 0 {
                        continue;
                    }
                    let mut buf = given.to_vec();
                    assert_eq!(
                        g.decrypt_detached(nonce, aad, &mut buf, tag),
                        Err(GcmError::Authentication),
                        "{b:?}, {n} B, {tl}-byte tag, wrong {what}"
                    );
                    assert!(
                        buf == given,
                        "{b:?}, {n} B, {tl}-byte tag, wrong {what}: the buffer is not the ciphertext it was given"
                    );
                }
                // And the right inputs still open it.
                let mut buf = ct.clone();
                g.decrypt_detached(&nonce, aad, &mut buf, &tag)
                    .expect("open");
                assert_eq!(buf, pt, "{b:?}, {n} B");
            }
        }
    }
}

#[test]
fn a_refused_batch_gives_every_ciphertext_back() {
    let key = [3u8; 16];
    for b in backends() {
        let g = gcm(&key, b);
        let sizes = [0usize, 33, 4096, (1 << 20) + 3, 17];
        let nonces: Vec<[u8; 12]> = (0..sizes.len()).map(|i| [i as u8; 12]).collect();
        let sealed: Vec<(Vec<u8>, Vec<u8>)> = sizes
            .iter()
            .zip(&nonces)
            .map(|(&n, nonce)| seal(b, &key, nonce, b"hdr", &pattern(n, 5), 16))
            .collect();
        for forged in 0..sizes.len() {
            let mut bufs: Vec<Vec<u8>> = sealed.iter().map(|(ct, _)| ct.clone()).collect();
            let mut tags: Vec<Vec<u8>> = sealed.iter().map(|(_, t)| t.clone()).collect();
            tags[forged][3] ^= 4;
            let mut jobs: Vec<OpenJob<'_>> = bufs
                .iter_mut()
                .zip(&tags)
                .zip(&nonces)
                .map(|((buf, tag), nonce)| OpenJob {
                    nonce,
                    aad: b"hdr",
                    buf,
                    tag,
                })
                .collect();
            assert_eq!(
                g.decrypt_batch(&mut jobs),
                Err(GcmError::Authentication),
                "{b:?}, job {forged} forged"
            );
            drop(jobs);
            for (i, (buf, (ct, _))) in bufs.iter().zip(&sealed).enumerate() {
                assert!(
                    buf == ct,
                    "{b:?}, job {forged} forged: buffer {i} is not its ciphertext"
                );
            }
        }
    }
}

/// The reason for the policy: a refused open destroys nothing, so a receiver that does not know
/// which of its keys was used can try them in turn on the same buffer.
#[test]
fn another_key_can_be_tried_on_the_same_buffer() {
    let keys = [[1u8; 32], [2u8; 32], [3u8; 32]];
    let pt = pattern(100_000, 7);
    for b in backends() {
        let (ct, tag) = seal(b, &keys[2], &[4; 12], b"", &pt, 16);
        let mut buf = ct.clone();
        let opened_with = keys.iter().position(|k| {
            gcm(k, b)
                .decrypt_detached(&[4; 12], b"", &mut buf, &tag)
                .is_ok()
        });
        assert_eq!(opened_with, Some(2), "{b:?}");
        assert_eq!(buf, pt, "{b:?}");
    }
    // The typed API, in place and into a separate output.
    let cipher = Aes256Gcm::new(&keys[2].into());
    let wrong = Aes256Gcm::new(&keys[0].into());
    let nonce = [4u8; 12].into();
    let mut buf = pt.clone();
    let tag = cipher
        .encrypt_inout_detached(&nonce, b"", buf.as_mut_slice().into())
        .expect("seal");
    let ct = buf.clone();
    assert!(
        wrong
            .decrypt_inout_detached(&nonce, b"", buf.as_mut_slice().into(), &tag)
            .is_err()
    );
    assert_eq!(
        buf, ct,
        "typed, in place: not the ciphertext after a refusal"
    );
    let mut out = vec![0x55u8; ct.len()];
    let inout = gcmx::aead::inout::InOutBuf::new(&ct, &mut out).expect("same lengths");
    assert!(
        wrong
            .decrypt_inout_detached(&nonce, b"", inout, &tag)
            .is_err()
    );
    assert!(
        out.iter().all(|&x| x == 0x55),
        "typed, separate output: written after a refusal"
    );
    cipher
        .decrypt_inout_detached(&nonce, b"", buf.as_mut_slice().into(), &tag)
        .expect("open");
    assert_eq!(buf, pt);
}
