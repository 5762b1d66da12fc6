//! Parses arbitrary bytes as a Tink cleartext JSON keyset. Checks: no panic; a keyset that
//! parses writes JSON that parses again to the same keys.
#![no_main]

use gcmx_stream::Keyset;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(keyset) = Keyset::from_json(text) else {
        return;
    };
    let again = Keyset::from_json(&keyset.to_json()).expect("gcmx's own JSON parses");
    let ids = |k: &Keyset| -> Vec<(u32, Vec<u8>, usize, u32)> {
        k.decryption_keys()
            .iter()
            .map(|k| {
                (
                    k.key_id(),
                    k.to_proto().to_vec(),
                    k.derived_key_size(),
                    k.segment_size(),
                )
            })
            .collect()
    };
    assert!(ids(&keyset) == ids(&again), "keys differ after a round trip");
});
