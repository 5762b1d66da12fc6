//! A stream's geometry ([`Layout`]) and runs of its segments ([`Span`]). With segments of `S`
//! bytes and a header of `H`, segment 0 holds `S - H - 16` bytes of plaintext and the others
//! `S - 16`, each followed by its tag; the last may be shorter, down to a bare tag. A stream has
//! at most 2^32 segments (the nonce's counter).

use crate::error::{Error, Result};

/// AES-GCM tag length.
pub(crate) const TAG_LEN: usize = 16;
/// Length of the random nonce prefix in the header.
pub(crate) const NONCE_PREFIX_LEN: usize = 7;
/// Most segments in one stream: the nonce's 32-bit counter.
const MAX_SEGMENTS: u64 = 1 << 32;

/// Segment sizes of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    segment_size: usize,
    derived_key_size: usize,
}

impl Layout {
    /// The layout of a validated key's streams ([`crate::StreamingKey::new`]).
    pub(crate) fn new(segment_size: usize, derived_key_size: usize) -> Layout {
        Layout {
            segment_size,
            derived_key_size,
        }
    }

    /// Derived key size (also the salt length).
    pub(crate) fn derived_key_size(&self) -> usize {
        self.derived_key_size
    }

    /// Header length: `1 + derived_key_size + 7`, also the header's first byte.
    pub(crate) fn header_len(&self) -> usize {
        1 + self.derived_key_size + NONCE_PREFIX_LEN
    }

    /// Ciphertext segment size (tag included).
    pub(crate) fn segment_size(&self) -> usize {
        self.segment_size
    }

    /// Ciphertext bytes of segment `index` when full (the first is shorter by the header).
    pub(crate) fn ciphertext_len(&self, index: u64) -> usize {
        if index == 0 {
            self.segment_size - self.header_len()
        } else {
            self.segment_size
        }
    }

    /// Plaintext bytes of segment `index` when full.
    pub(crate) fn plaintext_len(&self, index: u64) -> usize {
        self.ciphertext_len(index) - TAG_LEN
    }

    /// Where segment `index`'s plaintext starts in the stream's plaintext.
    pub(crate) fn plaintext_start(&self, index: u64) -> u64 {
        match index {
            0 => 0,
            i => self.plaintext_len(0) as u64 + (i - 1) * self.plaintext_len(1) as u64,
        }
    }

    /// Where segment `index`'s ciphertext starts in the stream (after the header).
    pub(crate) fn ciphertext_start(&self, index: u64) -> u64 {
        match index {
            0 => self.header_len() as u64,
            i => i * self.segment_size as u64,
        }
    }

    /// The segment that holds plaintext offset `pos` (were the stream long enough).
    pub(crate) fn segment_of(&self, pos: u64) -> u64 {
        let p0 = self.plaintext_len(0) as u64;
        if pos < p0 {
            0
        } else {
            1 + (pos - p0) / self.plaintext_len(1) as u64
        }
    }

    /// Number of segments of a plaintext of `len` bytes (at least one).
    pub(crate) fn segment_count(&self, len: u64) -> u64 {
        match len.checked_sub(self.plaintext_len(0) as u64) {
            None | Some(0) => 1,
            Some(rest) => 1 + rest.div_ceil(self.plaintext_len(1) as u64),
        }
    }

    /// Size of the ciphertext of a plaintext of `len` bytes, if it has at most 2^32 segments.
    pub(crate) fn ciphertext_size(&self, len: u64) -> Option<u64> {
        let n = self.segment_count(len);
        if n > MAX_SEGMENTS {
            return None;
        }
        len.checked_add(self.header_len() as u64)?
            .checked_add(n.checked_mul(TAG_LEN as u64)?)
    }

    /// Plaintext bytes of the `count` full segments from `first`.
    pub(crate) fn plaintext_of(&self, first: u64, count: usize) -> usize {
        self.ciphertext_of(first, count) - count * TAG_LEN
    }

    /// Ciphertext bytes of the `count` full segments from `first`.
    pub(crate) fn ciphertext_of(&self, first: u64, count: usize) -> usize {
        let short = if first == 0 && count > 0 {
            self.header_len()
        } else {
            0
        };
        count * self.segment_size - short
    }

    /// Full segments from `first` that fit in `room` bytes of plaintext (at most `most`, none
    /// past the stream's limit).
    pub(crate) fn segments_in(&self, first: u64, room: usize, most: usize) -> usize {
        self.fit(first, room, TAG_LEN, most)
    }

    /// [`Layout::segments_in`] for `room` bytes of ciphertext.
    pub(crate) fn segments_in_ciphertext(&self, first: u64, room: usize, most: usize) -> usize {
        self.fit(first, room, 0, most)
    }

    /// Full segments from `first` in `room` bytes, each `less` bytes shorter than its ciphertext.
    fn fit(&self, first: u64, room: usize, less: usize, most: usize) -> usize {
        let size = self.segment_size - less;
        let k = match first {
            0 => match room.checked_sub(size - self.header_len()) {
                Some(rest) => 1 + rest / size,
                None => 0,
            },
            _ => room / size,
        };
        let left = MAX_SEGMENTS.saturating_sub(first);
        k.min(most).min(usize::try_from(left).unwrap_or(usize::MAX))
    }

    /// `count` full segments from `first`, none the stream's last; an error past the stream's
    /// limit (`writing`: for a plaintext, else for a ciphertext).
    pub(crate) fn full(&self, first: u64, count: usize, writing: bool) -> Result<Span> {
        let len = self.ciphertext_len(first + count.saturating_sub(1) as u64);
        self.span(first, count, len, false, writing)
    }

    /// The segments of `plain` bytes of plaintext from segment `first`: full ones and, if
    /// `ends_stream`, the stream's last (shorter, the last full one, or empty for an empty
    /// stream). Without `ends_stream`, `plain` is whole segments.
    pub(crate) fn sealing(&self, first: u64, plain: usize, ends_stream: bool) -> Result<Span> {
        let full = self.segments_in(first, plain, usize::MAX);
        let tail = plain - self.plaintext_of(first, full);
        if ends_stream && (tail > 0 || full == 0) {
            self.span(first, full + 1, tail + TAG_LEN, true, true)
        } else {
            let len = self.ciphertext_len(first + full.saturating_sub(1) as u64);
            self.span(first, full, len, ends_stream, true)
        }
    }

    /// The segments of `bytes` of ciphertext from segment `first`: full ones and, if `eof`, the
    /// stream's last, maybe shorter. An error where they cannot be: no bytes (the segment
    /// before was not the last), a last one shorter than a tag, too many segments.
    pub(crate) fn cut(&self, first: u64, bytes: usize, eof: bool) -> Result<Span> {
        if bytes == 0 {
            return Err(Error::format(if first == 0 {
                "ciphertext is truncated: it has a header but no segment"
            } else {
                "ciphertext is truncated: it ends after a segment that is not the last"
            }));
        }
        // Full segments before the last, which holds at least a byte.
        let full = self.segments_in_ciphertext(first, bytes - 1, usize::MAX);
        let left = bytes - self.ciphertext_of(first, full);
        if left < TAG_LEN {
            return Err(Error::format(
                "ciphertext is truncated: last segment is shorter than a tag",
            ));
        }
        self.span(first, full + 1, left, eof, false)
    }

    fn span(
        &self,
        first: u64,
        count: usize,
        last_len: usize,
        ends_stream: bool,
        writing: bool,
    ) -> Result<Span> {
        if first.saturating_add(count as u64) > MAX_SEGMENTS {
            return Err(if writing {
                Error::invalid("input too large: it needs more than 2^32 segments of this size")
            } else {
                Error::format("ciphertext has more than 2^32 segments")
            });
        }
        Ok(Span {
            layout: *self,
            first,
            count,
            last_len,
            ends_stream,
        })
    }
}

/// Segments `first..first + count`, their ciphertexts back to back: full but the last, which
/// may be shorter and the stream's last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    layout: Layout,
    first: u64,
    count: usize,
    /// Ciphertext length of the span's last segment.
    last_len: usize,
    ends_stream: bool,
}

/// One segment of a [`Span`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    /// Its index in the stream.
    pub(crate) index: u64,
    /// Where its ciphertext starts in the span's.
    pub(crate) at: usize,
    /// Its ciphertext length, tag included.
    pub(crate) len: usize,
    /// Whether it is the stream's last.
    pub(crate) last: bool,
}

impl Seg {
    /// Plaintext bytes.
    pub(crate) fn body(&self) -> usize {
        self.len - TAG_LEN
    }
}

impl Span {
    pub(crate) fn first(&self) -> u64 {
        self.first
    }

    /// The index of the segment after the span.
    pub(crate) fn end(&self) -> u64 {
        self.first + self.count as u64
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }

    pub(crate) fn ends_stream(&self) -> bool {
        self.ends_stream
    }

    pub(crate) fn segments(&self) -> impl Iterator<Item = Seg> + use<> {
        let span = *self;
        (0..span.count).map(move |j| span.seg(j))
    }

    /// The span's segment `j` (of [`Span::count`]).
    pub(crate) fn seg(&self, j: usize) -> Seg {
        let index = self.first + j as u64;
        let last = j + 1 == self.count;
        Seg {
            index,
            at: self.layout.ciphertext_of(self.first, j),
            len: if last {
                self.last_len
            } else {
                self.layout.ciphertext_len(index)
            },
            last: last && self.ends_stream,
        }
    }

    pub(crate) fn ciphertext_len(&self) -> usize {
        match self.count {
            0 => 0,
            n => self.layout.ciphertext_of(self.first, n - 1) + self.last_len,
        }
    }

    pub(crate) fn plaintext_len(&self) -> usize {
        self.ciphertext_len() - self.count * TAG_LEN
    }

    /// The span's first `n` segments (the stream's last only if all are taken).
    pub(crate) fn take(&self, n: usize) -> Span {
        if n >= self.count {
            return *self;
        }
        let last = self.first + n.saturating_sub(1) as u64;
        Span {
            count: n,
            last_len: self.layout.ciphertext_len(last),
            ends_stream: false,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_offsets() {
        let l = Layout::new(4096, 32);
        let lens = (l.header_len(), l.plaintext_len(0), l.plaintext_len(1));
        assert_eq!(lens, (40, 4096 - 40 - 16, 4080));
        let counts = [0, 4040, 4041, 4040 + 4080, 4040 + 4080 + 1].map(|n| l.segment_count(n));
        assert_eq!(counts, [1, 1, 2, 2, 3]);
        let sizes = [0, 4040, 4040 + 4080].map(|n| l.ciphertext_size(n));
        assert_eq!(sizes, [Some(40 + 16), Some(4096), Some(8192)]);
        for i in 0..5 {
            let start = l.plaintext_start(i);
            assert_eq!(l.segment_of(start), i);
            assert_eq!(l.segment_of(start + l.plaintext_len(i) as u64 - 1), i);
            let at = l.header_len() + l.ciphertext_of(0, i as usize);
            assert_eq!(l.ciphertext_start(i) as usize, at);
        }
        // Tink 1.16.1: 100 bytes with segment size 57, dks 32 gave 204 bytes
        assert_eq!(Layout::new(57, 32).ciphertext_size(100), Some(204));
        // 2^32 segments is the most
        let l = Layout::new(41, 16);
        assert_eq!(l.header_len(), 24);
        let max = 1 + ((1u64 << 32) - 1) * 25;
        assert!(l.ciphertext_size(max).is_some());
        assert!(l.ciphertext_size(max + 1).is_none());
    }

    #[test]
    fn spans_cut_and_seal_whole_segments() {
        let l = Layout::new(100, 16);
        let (p0, p) = (l.plaintext_len(0), l.plaintext_len(1));
        // Reading: full segments, the last shorter when the input ended.
        let s = l.cut(0, 76 + 100 + 30, true).unwrap();
        let segs: Vec<Seg> = s.segments().collect();
        assert_eq!(segs.len(), 3);
        assert_eq!((segs[2].at, segs[2].len, segs[2].last), (176, 30, true));
        assert!(!segs[1].last);
        assert_eq!(s.plaintext_len(), p0 + p + 14);
        assert!(l.cut(3, 0, true).is_err());
        assert!(l.cut(0, 76 + 15, true).is_err());
        assert_eq!(l.cut(1, 200, false).unwrap().count(), 2);
        // Writing: the stream's last segment is the partial one, or the last full one, or an
        // empty one for an empty stream.
        assert_eq!(l.sealing(0, 0, true).unwrap().segments().count(), 1);
        let s = l.sealing(0, p0 + p, true).unwrap();
        assert_eq!(s.count(), 2);
        assert!(s.ends_stream() && s.segments().last().unwrap().last);
        let s = l.sealing(0, p0 + 5, true).unwrap();
        assert_eq!((s.count(), s.ciphertext_len()), (2, 76 + 5 + 16));
        let s = l.sealing(1, 2 * p, false).unwrap();
        assert_eq!((s.first(), s.end(), s.ends_stream()), (1, 3, false));
        assert_eq!(s.take(1).ciphertext_len(), 100);
        // The counter's limit.
        assert!(l.full((1 << 32) - 2, 2, true).is_ok());
        assert!(l.full((1 << 32) - 2, 3, true).is_err());
        assert!(l.cut((1 << 32) - 1, 150, true).is_err());
        assert_eq!(l.segments_in((1 << 32) - 2, 10 * p, 9), 2);
        assert_eq!(l.segments_in(0, p0 - 1, 9), 0);
        assert_eq!(l.segments_in(0, p0 + 3 * p, 9), 4);
        assert_eq!(l.segments_in(0, p0 + 3 * p, 3), 3);
        assert_eq!(l.segments_in(5, 3 * p - 1, 9), 2);
        assert_eq!(l.segments_in_ciphertext(0, 76 + 99, 9), 1);
        assert_eq!(l.segments_in_ciphertext(0, 76 + 100, 9), 2);
    }
}
