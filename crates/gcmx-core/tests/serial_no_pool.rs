//! A serial call never starts a thread pool: sealing, opening and refusing a forged message on
//! the one-thread engine (single calls, batches of none and of one, the typed API) leave rayon's
//! global pool unstarted.
//!
//! A plain program (`harness = false`), so that it also runs where threads cannot start (under
//! qemu-user, where a call that started the pool would hang instead of failing). The check at
//! the end starts no thread either: it asks rayon to build the global pool with a spawn handler
//! that refuses, which rayon calls only if no global pool exists yet.

use std::sync::atomic::{AtomicBool, Ordering};

use gcmx_core::aead::{AeadInOut, KeyInit};
use gcmx_core::backend::{KeyedEngine, SerialEngine, open, open_batch, seal, seal_batch};
use gcmx_core::{Aes128Gcm, Error, OpenJob, SealJob};

fn serial(key: &[u8]) -> KeyedEngine {
    KeyedEngine::new(key, |_| Ok(Box::new(SerialEngine))).unwrap()
}

/// Seal, open, and refuse a forged tag, for one message.
fn single(keyed: &KeyedEngine, len: usize) {
    let nonce = [5u8; 12];
    let pt: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let mut buf = pt.clone();
    let mut tag = [0u8; 16];
    seal(keyed, &nonce, b"ad", &mut buf, &mut tag).unwrap();
    let ct = buf.clone();
    tag[15] ^= 0x80;
    assert_eq!(
        open(keyed, &nonce, b"ad", &mut buf, &tag),
        Err(Error::Authentication)
    );
    assert_eq!(buf, ct, "refused: the ciphertext is given back");
    tag[15] ^= 0x80;
    open(keyed, &nonce, b"ad", &mut buf, &tag).unwrap();
    assert_eq!(buf, pt);
}

/// Batches of none and of one message, the one refused once.
fn batches(keyed: &KeyedEngine) {
    seal_batch(keyed, &mut []).unwrap();
    open_batch(keyed, &mut []).unwrap();
    let nonce = [6u8; 12];
    let mut buf = vec![9u8; 100];
    let mut tag = [0u8; 16];
    seal_batch(
        keyed,
        &mut [SealJob {
            nonce: &nonce,
            aad: b"",
            buf: &mut buf,
            tag: &mut tag,
        }],
    )
    .unwrap();
    let ct = buf.clone();
    let mut bad = tag;
    bad[0] ^= 1;
    let job = |tag: &[u8], buf: &mut [u8]| {
        open_batch(
            keyed,
            &mut [OpenJob {
                nonce: &nonce,
                aad: b"",
                buf,
                tag,
            }],
        )
    };
    assert_eq!(job(&bad, &mut buf), Err(Error::Authentication));
    assert_eq!(buf, ct);
    job(&tag, &mut buf).unwrap();
    assert_eq!(buf, vec![9u8; 100]);
}

/// The typed API's refusal in place.
fn typed() {
    let c = Aes128Gcm::new(&[1u8; 16].into());
    let nonce = [2u8; 12].into();
    let mut buf = [3u8; 64];
    let mut tag = c
        .encrypt_inout_detached(&nonce, b"", buf.as_mut_slice().into())
        .unwrap();
    let ct = buf;
    tag[3] ^= 4;
    assert!(
        c.decrypt_inout_detached(&nonce, b"", buf.as_mut_slice().into(), &tag)
            .is_err()
    );
    assert_eq!(buf, ct);
}

fn main() {
    for key_len in [16, 24, 32] {
        let keyed = serial(&vec![0x11; key_len]);
        for len in [0, 1, 16, 64, 1000, 300_000] {
            single(&keyed, len);
        }
        batches(&keyed);
    }
    typed();

    static ASKED: AtomicBool = AtomicBool::new(false);
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .spawn_handler(|_| {
            ASKED.store(true, Ordering::SeqCst);
            Err(std::io::Error::other("this test starts no thread"))
        })
        .build_global();
    assert!(built.is_err(), "the refusing spawn handler fails the build");
    assert!(
        ASKED.load(Ordering::SeqCst),
        "rayon's global pool was already started by a serial call ({built:?})"
    );
    println!(
        "serial calls (seal, open, refusals, batches of 0 and 1, typed API): no thread pool started"
    );
}
