//! Parses arbitrary bytes as Tink's serialized `AesGcmHkdfStreamingKey` protobuf, the key
//! inside a JSON keyset (in base64). Checks: no panic; a key that parses serializes to bytes
//! that parse to the same key.
#![no_main]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use gcmx_stream::Keyset;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let json = format!(
        r#"{{"primaryKeyId": 1, "key": [{{"keyData": {{"typeUrl": "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey", "value": "{}", "keyMaterialType": "SYMMETRIC"}}, "status": "ENABLED", "keyId": 1, "outputPrefixType": "RAW"}}]}}"#,
        BASE64.encode(data)
    );
    let Ok(keyset) = Keyset::from_json(&json) else {
        return;
    };
    let again = Keyset::from_json(&keyset.to_json()).expect("gcmx's own bytes parse");
    assert!(*again.to_json() == *keyset.to_json());
    let (key, other) = (keyset.primary(), again.primary());
    assert_eq!(other.derived_key_size(), key.derived_key_size());
    assert_eq!(other.segment_size(), key.segment_size());
});
