//! Tink cleartext JSON keysets holding `AesGcmHkdfStreamingKey` keys.
//!
//! ```json
//! {"primaryKeyId": N, "key": [{"keyData": {
//!     "typeUrl": "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey",
//!     "value": "<base64 of the protobuf key>", "keyMaterialType": "SYMMETRIC"},
//!   "status": "ENABLED", "keyId": N, "outputPrefixType": "RAW"}]}
//! ```
//!
//! Validation follows Tink 1.16, restricted to HKDF-SHA256 ([`StreamingKey::new`]).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::error::{Error, Result};
use crate::format::{Header, hkdf_sha256};
use crate::layout::{Layout, NONCE_PREFIX_LEN, TAG_LEN};
use crate::options::Options;
use crate::proto::{self, RawKey, RawParams};
use crate::wipe::wipe_this_stack;

const TYPE_URL: &str = "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey";

/// Tink's `HashType` value for SHA-256.
const HASH_SHA256: u32 = 3;

/// A good ciphertext segment size for most uses: 1 MiB, as Tink's `AES256_GCM_HKDF_1MB`.
pub const DEFAULT_SEGMENT_SIZE: u32 = 1 << 20;

/// Largest ciphertext segment size Tink accepts.
pub const MAX_SEGMENT_SIZE: u32 = i32::MAX as u32;

/// Tink's `HashType` names, by value.
const HASH_NAMES: &str = "UNKNOWN_HASH SHA1 SHA384 SHA256 SHA512 SHA224";

/// The AES key size of a new key (also the size of each stream's derived key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeySize {
    /// AES-128: 16-byte key material and derived keys (Tink's `AES128_GCM_HKDF_*`).
    Aes128,
    /// AES-256: 32-byte key material and derived keys (Tink's `AES256_GCM_HKDF_*`).
    #[default]
    Aes256,
}

/// One validated AES-GCM-HKDF streaming key. Its key material is wiped on drop and never
/// shown (`Debug` prints its length).
#[derive(Clone)]
pub struct StreamingKey {
    key_id: u32,
    ikm: Zeroizing<Vec<u8>>,
    derived_key_size: usize,
    segment_size: u32,
}

impl std::fmt::Debug for StreamingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamingKey")
            .field("key_id", &self.key_id)
            .field("ikm", &format_args!("<{} bytes>", self.ikm.len()))
            .field("derived_key_size", &self.derived_key_size)
            .field("segment_size", &self.segment_size)
            .finish()
    }
}

/// A keyset error about the key `key_id`.
fn key_error(key_id: u32, what: impl std::fmt::Display) -> Error {
    Error::keyset(format!("key {key_id}: {what}"))
}

impl StreamingKey {
    /// A key from its parts, validated as Tink does (HKDF-SHA256 only): derived key size 16 or
    /// 32, key material at least that long, segment size from `1 + derived_key_size + 7 + 16 + 1`
    /// (the header, a tag and one plaintext byte in the first segment) to 2^31 - 1 bytes.
    ///
    /// ```
    /// use gcmx_stream::StreamingKey;
    /// assert!(StreamingKey::new(1, &[7u8; 32], 32, 4096).is_ok());
    /// assert!(StreamingKey::new(1, &[7u8; 16], 32, 4096).is_err()); // material too short
    /// assert!(StreamingKey::new(1, &[7u8; 32], 32, 56).is_err());   // segment too small
    /// ```
    pub fn new(
        key_id: u32,
        ikm: &[u8],
        derived_key_size: usize,
        segment_size: u32,
    ) -> Result<Self> {
        let dks = derived_key_size;
        if dks != 16 && dks != 32 {
            let what = format!("derived key size {dks} is not supported (16 or 32 bytes)");
            return Err(key_error(key_id, what));
        }
        if ikm.len() < dks {
            let n = ikm.len();
            let what = format!("key material has {n} bytes, fewer than the derived key size {dks}");
            return Err(key_error(key_id, what));
        }
        // The header, a tag and a plaintext byte in the first segment.
        let min = (1 + dks + NONCE_PREFIX_LEN + TAG_LEN + 1) as u32;
        if segment_size < min || segment_size > MAX_SEGMENT_SIZE {
            let what = format!(
                "ciphertext segment size {segment_size} is out of range ({min} to {MAX_SEGMENT_SIZE} bytes)"
            );
            return Err(key_error(key_id, what));
        }
        Ok(StreamingKey {
            key_id,
            ikm: Zeroizing::new(ikm.to_vec()),
            derived_key_size,
            segment_size,
        })
    }

    /// The key id in the keyset.
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// Size of each file's derived AES key (16 or 32 bytes).
    pub fn derived_key_size(&self) -> usize {
        self.derived_key_size
    }

    /// Ciphertext segment size in bytes (tag included).
    pub fn segment_size(&self) -> u32 {
        self.segment_size
    }

    /// The ciphertext size of a plaintext of `len` bytes, or `None` past Tink's limit of 2^32
    /// segments.
    ///
    /// ```
    /// let key = gcmx_stream::StreamingKey::new(1, &[7u8; 32], 32, 4096)?;
    /// assert_eq!(key.ciphertext_size(0), Some(40 + 16)); // header and an empty last segment
    /// assert_eq!(key.ciphertext_size(4040), Some(4096));
    /// # Ok::<(), gcmx_stream::Error>(())
    /// ```
    pub fn ciphertext_size(&self, len: u64) -> Option<u64> {
        self.layout().ciphertext_size(len)
    }

    /// One stream's AES key: HKDF-SHA256 of the key material, salted by the header, with the
    /// associated data as info.
    pub(crate) fn stream_key(&self, header: &Header, aad: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
        let key = hkdf_sha256(&self.ikm, &header.salt, aad, self.derived_key_size);
        // HMAC states wipe themselves, but moving one by value leaves copies of it, the
        // pseudorandom key and the output in the frames below this one.
        wipe_this_stack();
        key
    }

    /// The segment sizes of streams written with this key.
    pub(crate) fn layout(&self) -> Layout {
        Layout::new(self.segment_size as usize, self.derived_key_size)
    }

    /// A key from Tink's serialized `AesGcmHkdfStreamingKey` protobuf (what a JSON keyset holds
    /// in base64), validated as [`StreamingKey::new`] does.
    fn from_proto(key_id: u32, bytes: &[u8]) -> Result<Self> {
        let raw = proto::decode_key(bytes)
            .map_err(|e| key_error(key_id, format!("malformed AesGcmHkdfStreamingKey ({e})")))?;
        if raw.version != 0 {
            let what = format!("key version {} is not supported (0)", raw.version);
            return Err(key_error(key_id, what));
        }
        let hash = raw.params.hkdf_hash_type;
        if hash != HASH_SHA256 {
            let name = HASH_NAMES
                .split(' ')
                .nth(hash as usize)
                .unwrap_or("an unknown hash");
            let what = format!("HKDF hash {name} ({hash}) is not supported, only SHA256");
            return Err(key_error(key_id, what));
        }
        let dks = raw.params.derived_key_size as usize;
        let seg = raw.params.ciphertext_segment_size;
        StreamingKey::new(key_id, &raw.key_value, dks, seg)
    }

    /// The key as Tink's serialized `AesGcmHkdfStreamingKey` protobuf (returned zeroizing).
    fn to_proto(&self) -> Zeroizing<Vec<u8>> {
        proto::encode_key(&RawKey {
            version: 0,
            params: RawParams {
                ciphertext_segment_size: self.segment_size,
                derived_key_size: self.derived_key_size as u32,
                hkdf_hash_type: HASH_SHA256,
            },
            key_value: self.ikm.clone(),
        })
    }
}

/// A Tink keyset of AES-GCM-HKDF streaming keys: its enabled keys and which one is primary.
/// The primary encrypts; decryption finds the key that wrote a stream among all of them.
///
/// The adapters start here: [`Keyset::encrypting_writer`], [`Keyset::decrypting_reader`],
/// [`Keyset::decrypting_buf_reader`], [`Keyset::seekable_reader`] (and, with `tokio`, their
/// async forms), run as the keyset's [`Options`] say ([`Keyset::with_options`]).
///
/// ```
/// use gcmx_stream::{KeySize, Keyset};
/// let keyset = Keyset::generate(KeySize::Aes256, 1 << 20)?;
/// let json = keyset.to_json(); // Tink's cleartext JSON: keep it secret
/// let again = Keyset::from_json(&json)?;
/// assert_eq!(again.primary().key_id(), keyset.primary().key_id());
/// # Ok::<(), gcmx_stream::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Keyset {
    primary: usize,
    keys: Vec<StreamingKey>,
    options: Options,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonKeyset {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    primary_key_id: Option<u32>,
    #[serde(default)]
    key: Vec<JsonKey>,
    #[serde(default, skip_serializing)]
    encrypted_keyset: Option<serde_json::Value>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonKey {
    key_data: Option<JsonKeyData>,
    status: Option<String>,
    key_id: Option<u32>,
    output_prefix_type: Option<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonKeyData {
    type_url: Option<String>,
    /// Base64 of the key: wiped on drop.
    value: Option<String>,
    key_material_type: Option<String>,
}

impl Drop for JsonKeyData {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.value.zeroize();
    }
}

/// A keyset of one key, primary.
impl From<StreamingKey> for Keyset {
    fn from(key: StreamingKey) -> Keyset {
        Keyset::of(0, vec![key])
    }
}

impl Keyset {
    /// A new keyset of one fresh random key from the operating system's generator (with a
    /// random key id), primary. Its segments are `segment_size` bytes of ciphertext:
    /// [`DEFAULT_SEGMENT_SIZE`] suits most uses.
    pub fn generate(key_size: KeySize, segment_size: u32) -> Result<Keyset> {
        let size = match key_size {
            KeySize::Aes128 => 16,
            KeySize::Aes256 => 32,
        };
        let mut ikm = Zeroizing::new(vec![0u8; size]);
        crate::format::random(&mut ikm)?;
        let mut id = [0u8; 4];
        crate::format::random(&mut id)?;
        // Tink's key ids are positive 31-bit numbers in practice.
        let key_id = (u32::from_be_bytes(id) & 0x7fff_ffff).max(1);
        StreamingKey::new(key_id, &ikm, size, segment_size).map(Keyset::from)
    }

    /// A keyset of `keys` whose primary is `keys[primary]`; key ids must be distinct.
    pub fn new(primary: usize, keys: Vec<StreamingKey>) -> Result<Keyset> {
        if primary >= keys.len() {
            return Err(Error::keyset("primary key index out of range"));
        }
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|o| o.key_id == k.key_id) {
                return Err(Error::keyset(format!("key id {} appears twice", k.key_id)));
            }
        }
        Ok(Keyset::of(primary, keys))
    }

    /// The keyset of `keys` (checked), `keys[primary]` primary, with the default options.
    fn of(primary: usize, keys: Vec<StreamingKey>) -> Keyset {
        Keyset {
            primary,
            keys,
            options: Options::default(),
        }
    }

    /// The same keyset, its adapters run as `options` say (the backend and the window).
    ///
    /// ```
    /// use gcmx_stream::{Backend, KeySize, Keyset, Options};
    /// let opts = Options::default().with_backend(Backend::Cpu).with_window_bytes(4 << 20);
    /// let keyset = Keyset::generate(KeySize::Aes256, 1 << 20)?.with_options(opts);
    /// let w = keyset.encrypting_writer(Vec::new(), b"")?;
    /// # Ok::<(), gcmx_stream::Error>(())
    /// ```
    pub fn with_options(self, options: Options) -> Keyset {
        Keyset { options, ..self }
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// The primary key (used to encrypt).
    pub fn primary(&self) -> &StreamingKey {
        &self.keys[self.primary]
    }

    /// All enabled keys, the primary first (tried in this order to decrypt).
    pub(crate) fn decryption_keys(&self) -> Vec<&StreamingKey> {
        let mut keys: Vec<&StreamingKey> = self.keys.iter().collect();
        keys[..=self.primary].rotate_right(1);
        keys
    }

    /// Parses a Tink cleartext JSON keyset (as Tink's `JsonKeysetWriter` and [`Keyset::to_json`]
    /// write it). Disabled and destroyed keys are skipped; every enabled key must be a valid
    /// `AesGcmHkdfStreamingKey`, and the primary must be enabled.
    ///
    /// ```
    /// let json = r#"{"primaryKeyId": 372866200, "key": [{"keyData": {
    ///     "typeUrl": "type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey",
    ///     "value": "EgcIgCAQIBgDGiB2EmtI1CvF4gQY/LWs9THVjfQZaj8UeDqNKeq0HRQRRA==",
    ///     "keyMaterialType": "SYMMETRIC"},
    ///   "status": "ENABLED", "keyId": 372866200, "outputPrefixType": "RAW"}]}"#;
    /// let keyset = gcmx_stream::Keyset::from_json(json)?;
    /// assert_eq!(keyset.primary().segment_size(), 4096);
    /// # Ok::<(), gcmx_stream::Error>(())
    /// ```
    pub fn from_json(text: &str) -> Result<Keyset> {
        let bad = |e: String| Error::keyset(format!("keyset is not a valid Tink JSON keyset: {e}"));
        // Straight into the typed document (its key strings wiped on drop): an untyped `Value`
        // would keep copies of the key material.
        if !text.trim_start().starts_with('{') {
            // serde would also take a JSON array for the struct.
            return Err(bad("expected a JSON object".to_string()));
        }
        let parsed: JsonKeyset = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if parsed.encrypted_keyset.is_some() {
            return Err(Error::keyset(
                "encrypted keysets are not supported; give a cleartext JSON keyset",
            ));
        }
        let primary_id = parsed
            .primary_key_id
            .ok_or_else(|| Error::keyset("keyset has no primaryKeyId"))?;
        if parsed.key.is_empty() {
            return Err(Error::keyset("keyset holds no keys"));
        }
        let mut keys = Vec::new();
        let mut primary = None;
        for (n, k) in parsed.key.iter().enumerate() {
            let key_id = k
                .key_id
                .ok_or_else(|| Error::keyset(format!("keyset key #{n} has no keyId")))?;
            let status = k.status.as_deref().unwrap_or("UNKNOWN_STATUS");
            match status {
                "ENABLED" => {}
                "DISABLED" | "DESTROYED" => continue,
                other => return Err(key_error(key_id, format!("unknown status {other:?}"))),
            }
            let bad = |what: &str| key_error(key_id, what);
            let data = k.key_data.as_ref().ok_or_else(|| bad("no keyData"))?;
            let type_url = data.type_url.as_deref().unwrap_or("");
            if type_url != TYPE_URL {
                return Err(bad(&format!(
                    "key type {type_url:?} is not supported (gcmx reads only AesGcmHkdfStreamingKey)"
                )));
            }
            if let Some(t) = data.key_material_type.as_deref()
                && t != "SYMMETRIC"
            {
                return Err(bad(&format!("key material type {t:?}, expected SYMMETRIC")));
            }
            let value = data
                .value
                .as_deref()
                .ok_or_else(|| bad("keyData has no value"))?;
            let bytes = BASE64
                .decode(value)
                .map_err(|e| format!("keyData value is not base64 ({e})"));
            let bytes = Zeroizing::new(bytes.map_err(|e| bad(&e))?);
            let key = StreamingKey::from_proto(key_id, &bytes)?;
            if key_id == primary_id {
                if primary.is_some() {
                    return Err(Error::keyset(format!(
                        "keyset has several enabled keys with the primary id {primary_id}"
                    )));
                }
                primary = Some(keys.len());
            }
            keys.push(key);
        }
        let missing = format!("keyset's primary key {primary_id} is missing or not enabled");
        let primary = primary.ok_or_else(|| Error::keyset(missing))?;
        Ok(Keyset::of(primary, keys))
    }

    /// The keyset as Tink cleartext JSON (pretty-printed, with a final newline), returned
    /// zeroizing: it holds key material.
    pub fn to_json(&self) -> Zeroizing<String> {
        let doc = JsonKeyset {
            primary_key_id: Some(self.primary().key_id),
            key: self
                .keys
                .iter()
                .map(|k| JsonKey {
                    key_data: Some(JsonKeyData {
                        type_url: Some(TYPE_URL.to_string()),
                        value: Some(BASE64.encode(k.to_proto().as_slice())),
                        key_material_type: Some("SYMMETRIC".to_string()),
                    }),
                    status: Some("ENABLED".to_string()),
                    key_id: Some(k.key_id),
                    output_prefix_type: Some("RAW".to_string()),
                })
                .collect(),
            encrypted_keyset: None,
        };
        // Reserved up front (about 300 bytes a key): a reallocation would leave key material.
        let mut bytes = Zeroizing::new(Vec::with_capacity(1024 + 1024 * self.keys.len()));
        // Serializing plain strings and numbers into memory cannot fail.
        let _ = serde_json::to_writer_pretty(&mut *bytes, &doc);
        bytes.push(b'\n');
        // JSON text is UTF-8.
        Zeroizing::new(String::from_utf8(std::mem::take(&mut *bytes)).unwrap_or_default())
    }
}
