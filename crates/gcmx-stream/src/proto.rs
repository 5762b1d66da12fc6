//! The few protobuf messages of Tink's `AesGcmHkdfStreamingKey`, encoded and decoded by hand.
//!
//! ```text
//! message AesGcmHkdfStreamingParams {
//!   uint32 ciphertext_segment_size = 1;
//!   uint32 derived_key_size = 2;
//!   HashType hkdf_hash_type = 3;          // SHA256 = 3
//! }
//! message AesGcmHkdfStreamingKey {
//!   uint32 version = 1;
//!   AesGcmHkdfStreamingParams params = 2;
//!   bytes key_value = 3;
//! }
//! ```
//!
//! Decoding follows protobuf's rules (any order, unknown fields skipped, the last scalar wins,
//! embedded messages merge) and never panics.

use zeroize::Zeroizing;

/// A decoding failure's short reason.
pub(crate) type DecodeError = &'static str;

const WIRE_VARINT: u8 = 0;
const WIRE_I64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_I32: u8 = 5;

/// `AesGcmHkdfStreamingParams`, as on the wire (not yet validated).
#[derive(Default)]
pub(crate) struct RawParams {
    pub(crate) ciphertext_segment_size: u32,
    pub(crate) derived_key_size: u32,
    /// The `HashType` enum value.
    pub(crate) hkdf_hash_type: u32,
}

/// `AesGcmHkdfStreamingKey`, as on the wire (not yet validated); the key material is wiped on
/// drop.
#[derive(Default)]
pub(crate) struct RawKey {
    pub(crate) version: u32,
    pub(crate) params: RawParams,
    pub(crate) key_value: Zeroizing<Vec<u8>>,
}

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let (&byte, rest) = self.data.split_first().ok_or("truncated varint")?;
            self.data = rest;
            let bits = u64::from(byte & 0x7f);
            if i == 9 && bits > 1 {
                return Err("varint overflows 64 bits");
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes")
    }

    fn bytes(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        let n = usize::try_from(n).map_err(|_| "length too large")?;
        let split = self.data.split_at_checked(n);
        let (head, rest) = split.ok_or("truncated length-delimited field")?;
        self.data = rest;
        Ok(head)
    }

    /// The next (field number, wire type), or `None` at the end.
    fn tag(&mut self) -> Result<Option<(u64, u8)>, DecodeError> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let field = tag >> 3;
        if field == 0 {
            return Err("field number 0");
        }
        Ok(Some((field, (tag & 7) as u8)))
    }

    fn skip(&mut self, wire: u8) -> Result<(), DecodeError> {
        match wire {
            WIRE_VARINT => self.varint().map(|_| ()),
            WIRE_I64 => self.bytes(8).map(|_| ()),
            WIRE_LEN => self.len_delimited(wire).map(|_| ()),
            WIRE_I32 => self.bytes(4).map(|_| ()),
            _ => Err("unsupported wire type"),
        }
    }

    fn uint32(&mut self, wire: u8) -> Result<u32, DecodeError> {
        if wire != WIRE_VARINT {
            return Err("wrong wire type for an integer field");
        }
        u32::try_from(self.varint()?).map_err(|_| "integer field exceeds 32 bits")
    }

    fn len_delimited(&mut self, wire: u8) -> Result<&'a [u8], DecodeError> {
        if wire != WIRE_LEN {
            return Err("wrong wire type for a length-delimited field");
        }
        let n = self.varint()?;
        self.bytes(n)
    }
}

fn merge_params(params: &mut RawParams, data: &[u8]) -> Result<(), DecodeError> {
    let mut r = Reader { data };
    while let Some((field, wire)) = r.tag()? {
        match field {
            1 => params.ciphertext_segment_size = r.uint32(wire)?,
            2 => params.derived_key_size = r.uint32(wire)?,
            3 => params.hkdf_hash_type = r.uint32(wire)?,
            _ => r.skip(wire)?,
        }
    }
    Ok(())
}

/// Decodes a serialized `AesGcmHkdfStreamingKey`.
pub(crate) fn decode_key(data: &[u8]) -> Result<RawKey, DecodeError> {
    let mut key = RawKey::default();
    let mut r = Reader { data };
    while let Some((field, wire)) = r.tag()? {
        match field {
            1 => key.version = r.uint32(wire)?,
            2 => merge_params(&mut key.params, r.len_delimited(wire)?)?,
            3 => key.key_value = Zeroizing::new(r.len_delimited(wire)?.to_vec()),
            _ => r.skip(wire)?,
        }
    }
    Ok(key)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_uint32(out: &mut Vec<u8>, field: u64, v: u32) {
    // proto3: a zero scalar is not written.
    if v != 0 {
        put_varint(out, field << 3 | u64::from(WIRE_VARINT));
        put_varint(out, u64::from(v));
    }
}

fn put_bytes(out: &mut Vec<u8>, field: u64, v: &[u8]) {
    put_varint(out, field << 3 | u64::from(WIRE_LEN));
    put_varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

/// Encodes an `AesGcmHkdfStreamingKey` (fields in number order, zero scalars omitted, as
/// protobuf serializers do). The result holds key material: it is returned zeroizing.
pub(crate) fn encode_key(key: &RawKey) -> Zeroizing<Vec<u8>> {
    let mut params = Vec::with_capacity(16);
    put_uint32(&mut params, 1, key.params.ciphertext_segment_size);
    put_uint32(&mut params, 2, key.params.derived_key_size);
    put_uint32(&mut params, 3, key.params.hkdf_hash_type);
    let mut out = Zeroizing::new(Vec::with_capacity(params.len() + key.key_value.len() + 8));
    put_uint32(&mut out, 1, key.version);
    put_bytes(&mut out, 2, &params);
    put_bytes(&mut out, 3, &key.key_value);
    out
}
