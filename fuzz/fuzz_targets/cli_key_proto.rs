//! Parses arbitrary bytes as Tink's serialized `AesGcmHkdfStreamingKey` protobuf. Checks: no
//! panic; a key that parses serializes to bytes that parse to the same key.
#![no_main]

use gcmx_stream::StreamingKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(key) = StreamingKey::from_proto(1, data) else {
        return;
    };
    let again = StreamingKey::from_proto(1, &key.to_proto()).expect("gcmx's own bytes parse");
    assert!(*again.to_proto() == *key.to_proto());
    assert_eq!(again.derived_key_size(), key.derived_key_size());
    assert_eq!(again.segment_size(), key.segment_size());
});
