//! Every implementation the benchmark times, each under one key, with its key set-up.

pub(crate) mod aws_lc;
#[cfg(feature = "boringssl")]
pub(crate) mod boringssl;
pub(crate) mod gcmx_api;
pub(crate) mod haberdashery;
pub(crate) mod ring;

use std::hint::black_box;

use crate::peer::Peer;

/// Who wrote an implementation: gcmx's own entries are measured against the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// gcmx's typed API.
    GcmxTyped,
    /// gcmx's runtime `Gcm`.
    GcmxRuntime,
    /// One haberdashery profile.
    Haberdashery,
    /// BoringSSL.
    #[cfg(feature = "boringssl")]
    BoringSsl,
    /// aws-lc-rs.
    AwsLc,
    /// ring.
    Ring,
}

impl Kind {
    /// gcmx itself (not a peer).
    pub(crate) fn is_gcmx(self) -> bool {
        matches!(self, Kind::GcmxTyped | Kind::GcmxRuntime)
    }
}

/// A key set-up from the key's bytes, timed.
pub(crate) type Setup = Box<dyn FnMut(&[u8])>;

/// One implementation under one key.
pub(crate) struct Entry {
    /// Its name in the tables.
    pub(crate) name: String,
    /// Who wrote it.
    pub(crate) kind: Kind,
    /// The keyed implementation.
    pub(crate) peer: Box<dyn Peer>,
    /// A key set-up from the key's bytes, ready to seal, then released: as its users do it.
    pub(crate) setup: Setup,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").field("name", &self.name).finish()
    }
}

/// Every implementation under `key` (16 or 32 bytes): gcmx's two APIs, then the peers;
/// `profiles` are the haberdashery profiles to include (for this key length, runnable here).
pub(crate) fn entries(key: &[u8], profiles: &[&'static haberdashery::Profile]) -> Vec<Entry> {
    let mut v = Vec::new();
    if key.len() == 16 {
        v.push(typed::<gcmx::Aes128Gcm>(key));
    } else {
        v.push(typed::<gcmx::Aes256Gcm>(key));
    }
    v.push(Entry {
        name: "gcmx `Gcm`".into(),
        kind: Kind::GcmxRuntime,
        peer: Box::new(gcmx_api::GcmxRuntime::new(key)),
        setup: Box::new(|k| drop(black_box(gcmx_api::GcmxRuntime::new(black_box(k))))),
    });
    for &p in profiles {
        let mut ctx = haberdashery::Ctx::new();
        v.push(Entry {
            name: format!("haberdashery {}", p.name),
            kind: Kind::Haberdashery,
            peer: Box::new(haberdashery::Haberdashery::new(p, key)),
            setup: Box::new(move |k| assert!(p.init_into(black_box(&mut ctx), black_box(k)))),
        });
    }
    #[cfg(feature = "boringssl")]
    {
        let mut ctx = boringssl::blank();
        v.push(Entry {
            name: "BoringSSL".into(),
            kind: Kind::BoringSsl,
            peer: Box::new(boringssl::BoringSsl::new(key)),
            setup: Box::new(move |k| {
                assert!(boringssl::init(black_box(&mut ctx), black_box(k)));
                boringssl::cleanup(&mut ctx);
            }),
        });
    }
    v.push(Entry {
        name: "aws-lc-rs".into(),
        kind: Kind::AwsLc,
        peer: Box::new(aws_lc::AwsLc::new(key)),
        setup: Box::new(|k| {
            black_box(aws_lc::AwsLc::new(black_box(k)));
        }),
    });
    v.push(Entry {
        name: "ring".into(),
        kind: Kind::Ring,
        peer: Box::new(ring::Ring::new(key)),
        setup: Box::new(|k| {
            black_box(ring::Ring::new(black_box(k)));
        }),
    });
    v
}

fn typed<C: gcmx_api::Typed + 'static>(key: &[u8]) -> Entry {
    Entry {
        name: "gcmx typed".into(),
        kind: Kind::GcmxTyped,
        peer: Box::new(gcmx_api::GcmxTyped::<C>::new(key)),
        setup: Box::new(|k| drop(black_box(gcmx_api::GcmxTyped::<C>::new(black_box(k))))),
    }
}
