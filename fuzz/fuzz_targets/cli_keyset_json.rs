//! Parses arbitrary bytes as a Tink cleartext JSON keyset. Checks: no panic; a keyset that
//! parses writes JSON that parses again to the same keys (the same JSON).
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
    // gcmx writes a keyset's keys in one way: the same keys, the same JSON.
    let json = keyset.to_json();
    let again = Keyset::from_json(&json).expect("gcmx's own JSON parses");
    assert!(*again.to_json() == *json, "keys differ after a round trip");
    assert_eq!(again.primary().key_id(), keyset.primary().key_id());
});
