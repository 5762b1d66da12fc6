//! What the streaming benches share.

/// `bytes` bytes of a fixed pseudo-random plaintext (xorshift64): incompressible, the same in
/// every run.
pub(crate) fn plaintext(bytes: usize) -> Vec<u8> {
    let mut plain = vec![0u8; bytes];
    let mut s: u64 = 0x243f_6a88_85a3_08d3;
    for w in plain.chunks_mut(8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        w.copy_from_slice(&s.to_le_bytes()[..w.len()]);
    }
    plain
}
