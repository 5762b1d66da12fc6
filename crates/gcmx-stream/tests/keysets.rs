//! Tink cleartext JSON keysets: read as Tink writes them, written as Tink reads them, and every
//! malformed, unsupported or out-of-range keyset refused with a clear reason.

use std::io::{Read, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use gcmx_stream::{DEFAULT_SEGMENT_SIZE, ErrorKind, KeySize, Keyset, MAX_SEGMENT_SIZE};

const TYPE_URL: &str = "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey";

const TINK_JSON: &str = r#"{
  "primaryKeyId": 372866200,
  "key": [
    {
      "keyData": {
        "typeUrl": "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey",
        "value": "EgcIgCAQIBgDGiB2EmtI1CvF4gQY/LWs9THVjfQZaj8UeDqNKeq0HRQRRA==",
        "keyMaterialType": "SYMMETRIC"
      },
      "status": "ENABLED",
      "keyId": 372866200,
      "outputPrefixType": "RAW"
    }
  ]
}"#;

fn keyset_with(value_b64: &str, extra: &str) -> String {
    format!(
        r#"{{"primaryKeyId": 7, "key": [{{"keyData": {{"typeUrl": "{TYPE_URL}", "value": "{value_b64}", "keyMaterialType": "SYMMETRIC"}}, "status": "ENABLED", "keyId": 7, "outputPrefixType": "RAW"}}{extra}]}}"#
    )
}

/// Tink's `AesGcmHkdfStreamingKey` (version 0; params: segment size, derived key size, HKDF
/// hash; the key material: `ikm_len` bytes of 1), encoded by hand, in base64.
fn key_b64(seg: u32, dks: u32, hash: u32, ikm_len: usize) -> String {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut params = Vec::new();
    for (field, v) in [(1u64, seg), (2, dks), (3, hash)] {
        if v != 0 {
            varint(&mut params, field << 3);
            varint(&mut params, u64::from(v));
        }
    }
    let mut key = vec![2 << 3 | 2];
    varint(&mut key, params.len() as u64);
    key.extend_from_slice(&params);
    key.push(3 << 3 | 2);
    varint(&mut key, ikm_len as u64);
    key.extend(std::iter::repeat_n(1u8, ikm_len));
    BASE64.encode(key)
}

/// A round trip through `keyset`, so that keys of equal material are seen to be equal.
fn round_trip(keyset: &Keyset, pt: &[u8]) -> Vec<u8> {
    let mut w = keyset.encrypting_writer(Vec::new(), b"").unwrap();
    w.write_all(pt).unwrap();
    w.finish().unwrap()
}

#[test]
fn reads_a_tink_keyset() {
    let ks = Keyset::from_json(TINK_JSON).unwrap();
    let k = ks.primary();
    assert_eq!(k.key_id(), 372866200);
    assert_eq!(k.segment_size(), 4096);
    assert_eq!(k.derived_key_size(), 32);
    // Its material: the key's protobuf, in base64, holds it (0x76 first).
    assert!(ks.to_json().contains("GiB2EmtI"));
}

#[test]
fn writes_what_it_reads() {
    let ks = Keyset::from_json(TINK_JSON).unwrap();
    let json = ks.to_json();
    let again = Keyset::from_json(&json).unwrap();
    let ct = round_trip(&ks, b"same key");
    let mut back = Vec::new();
    again
        .decrypting_reader(&ct[..], b"")
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, b"same key");
    assert_eq!(again.primary().key_id(), 372866200);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let t: serde_json::Value = serde_json::from_str(TINK_JSON).unwrap();
    assert_eq!(v, t, "same JSON document as Tink's writer");
}

#[test]
fn generated_keys_have_the_requested_shape() {
    let a = Keyset::generate(KeySize::Aes128, 4096).unwrap();
    let k = a.primary();
    assert_eq!((k.derived_key_size(), k.segment_size()), (16, 4096));
    assert!(k.key_id() >= 1 && k.key_id() <= i32::MAX as u32);
    let b = Keyset::generate(KeySize::Aes256, DEFAULT_SEGMENT_SIZE).unwrap();
    assert_eq!(b.primary().derived_key_size(), 32);
    // Fresh material each time: another key does not open the stream.
    let c = Keyset::generate(KeySize::Aes256, DEFAULT_SEGMENT_SIZE).unwrap();
    let ct = round_trip(&b, b"x");
    let err = c
        .decrypting_reader(&ct[..], b"")
        .unwrap()
        .read_to_end(&mut Vec::new());
    assert!(err.is_err());
    assert!(
        !b.to_json().contains("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        "all-zero material"
    );
    assert!(Keyset::generate(KeySize::Aes256, 56).is_err());
    assert!(Keyset::generate(KeySize::Aes256, 57).is_ok());
    assert!(Keyset::generate(KeySize::Aes128, 40).is_err());
    assert!(Keyset::generate(KeySize::Aes128, 41).is_ok());
}

#[test]
fn limits_match_tink() {
    // Tink 1.16.1 accepts 57 (dks 32) and 41 (dks 16), refuses 56 and 40 and 2^31.
    let ok = |seg, dks, ikm| Keyset::from_json(&keyset_with(&key_b64(seg, dks, 3, ikm), ""));
    assert!(ok(57, 32, 32).is_ok());
    assert!(ok(56, 32, 32).is_err());
    assert!(ok(41, 16, 16).is_ok());
    assert!(ok(40, 16, 16).is_err());
    assert!(ok(1 << 31, 16, 16).is_err());
    assert!(ok(MAX_SEGMENT_SIZE, 16, 16).is_ok());
    assert!(ok(4096, 16, 32).is_ok());
    assert!(ok(4096, 32, 16).is_err(), "ikm shorter than derived key");
    assert!(ok(4096, 24, 24).is_err());
    assert!(ok(4096, 0, 16).is_err());
}

#[test]
fn bad_keysets_are_clear_errors() {
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "not a valid Tink JSON keyset"),
        ("[]".into(), "not a valid Tink JSON keyset"),
        (r#"{"key": []}"#.into(), "no primaryKeyId"),
        (r#"{"primaryKeyId": 1, "key": []}"#.into(), "no keys"),
        (r#"{"encryptedKeyset": "abc"}"#.into(), "encrypted keysets"),
        (
            TINK_JSON.replace("AesGcmHkdfStreamingKey", "AesGcmKey"),
            "not supported",
        ),
        (keyset_with(&key_b64(4096, 32, 4, 32), ""), "SHA512"),
        (keyset_with(&key_b64(4096, 32, 1, 32), ""), "SHA1"),
        (keyset_with("!!!", ""), "not base64"),
        (keyset_with("AAAA", ""), "malformed"),
        (
            keyset_with(&key_b64(4096, 32, 3, 32), "")
                .replace("\"primaryKeyId\": 7", "\"primaryKeyId\": 8"),
            "missing or not enabled",
        ),
        (
            keyset_with(&key_b64(4096, 32, 3, 32), "").replace("ENABLED", "DISABLED"),
            "missing or not enabled",
        ),
        (
            keyset_with(&key_b64(4096, 32, 3, 32), "").replace("ENABLED", "WHATEVER"),
            "unknown status",
        ),
        (keyset_with(&key_b64(10, 32, 3, 32), ""), "segment size"),
        (
            TINK_JSON.replace("372866200,\n      \"output", "-1,\n      \"output"),
            "not a valid Tink JSON keyset",
        ),
    ];
    for (json, want) in cases {
        let err = Keyset::from_json(&json).expect_err(&json);
        assert_eq!(err.kind(), ErrorKind::Keyset);
        assert!(
            err.to_string().contains(want),
            "{json}: got {err}, want {want}"
        );
    }
}

#[test]
fn several_keys_primary_first_and_disabled_skipped() {
    let k1 = key_b64(4096, 32, 3, 32);
    let extra = format!(
        r#", {{"keyData": {{"typeUrl": "{TYPE_URL}", "value": "{k1}", "keyMaterialType": "SYMMETRIC"}}, "status": "ENABLED", "keyId": 9, "outputPrefixType": "RAW"}}, {{"keyData": {{"typeUrl": "other", "value": "", "keyMaterialType": "SYMMETRIC"}}, "status": "DISABLED", "keyId": 10, "outputPrefixType": "RAW"}}"#
    );
    let json = keyset_with(&k1, &extra).replace("\"primaryKeyId\": 7", "\"primaryKeyId\": 9");
    let ks = Keyset::from_json(&json).unwrap();
    assert_eq!(ks.primary().key_id(), 9);
    // Both keys decrypt (the primary, 9, is tried first).
    let only_7 = Keyset::from_json(&keyset_with(&k1, "")).unwrap();
    let ct = round_trip(&only_7, b"seven");
    let mut back = Vec::new();
    ks.decrypting_reader(&ct[..], b"")
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, b"seven");
}

#[test]
fn debug_never_shows_key_bytes() {
    let ks = Keyset::from_json(TINK_JSON).unwrap();
    let dbg = format!("{ks:?}");
    assert!(dbg.contains("<32 bytes>"));
    assert!(
        !dbg.contains("118"),
        "0x76 = 118 must not appear as a byte list: {dbg}"
    );
}

/// The key's protobuf is read by protobuf's rules: fields in any order, unknown fields of every
/// wire type skipped, an embedded message given in pieces merged; truncated or malformed bytes
/// are a keyset error, never a panic.
#[test]
fn key_protobufs_follow_protobuf_rules() {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let field = |out: &mut Vec<u8>, n: u64, bytes: &[u8]| {
        varint(out, n << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    };
    let mut key = Vec::new();
    // Unknown fields: varint 9, fixed64 10, fixed32 11.
    varint(&mut key, 9 << 3);
    varint(&mut key, 300);
    varint(&mut key, 10 << 3 | 1);
    key.extend_from_slice(&[0; 8]);
    varint(&mut key, 11 << 3 | 5);
    key.extend_from_slice(&[0; 4]);
    // The params in two pieces, around the key material.
    field(&mut key, 2, &[1 << 3, 0x80, 0x80, 0x40]); // segment size 1 MiB
    field(&mut key, 3, &[7; 16]);
    field(&mut key, 2, &[2 << 3, 16, 3 << 3, 3]); // derived key size 16, SHA256
    let ks = Keyset::from_json(&keyset_with(&BASE64.encode(&key), "")).unwrap();
    let k = ks.primary();
    assert_eq!((k.segment_size(), k.derived_key_size()), (1 << 20, 16));
    // Every truncation errs (or parses), and so do bytes that are not a protobuf.
    for n in 0..key.len() {
        let _ = Keyset::from_json(&keyset_with(&BASE64.encode(&key[..n]), ""));
    }
    for bad in [
        &[0x80u8][..],
        &[0x00],
        &[0x0b],
        &[0x0a, 0x01, 0x00],
        &[0x1a, 0x05, 0x00],
    ] {
        let e = Keyset::from_json(&keyset_with(&BASE64.encode(bad), "")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Keyset);
    }
}
