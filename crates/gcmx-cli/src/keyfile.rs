//! Keyset files: read with a size bound, written whole or not at all, and identified (device
//! and inode) so that no output is ever written over the keyset.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use gcmx_stream::Keyset;
use zeroize::Zeroizing;

use crate::error::{Error, Result};
use crate::files::FileId;

/// Largest keyset file read (a keyset of one key is about 400 bytes).
pub const MAX_KEYSET_BYTES: usize = 1 << 20;

/// Reads and parses a keyset file (a regular file, or a pipe such as `<(...)`): at most
/// [`MAX_KEYSET_BYTES`] are read, so an endless source (`/dev/zero`) fails at once. Returns
/// the keyset and the file's identity.
pub fn read(path: &Path) -> Result<(Keyset, FileId)> {
    let cannot = |e| Error::io(format!("cannot read keyset {}", path.display()), e);
    let file = File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_dir() {
        return Err(Error::keyset(format!(
            "keyset {} is a directory",
            path.display()
        )));
    }
    // Reserved up front so that the key material is never left behind by a reallocation.
    let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_KEYSET_BYTES + 1));
    file.take(MAX_KEYSET_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() > MAX_KEYSET_BYTES {
        return Err(Error::keyset(format!(
            "keyset {} is larger than {} KiB: not a keyset",
            path.display(),
            MAX_KEYSET_BYTES >> 10
        )));
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::keyset(format!("keyset {} is not UTF-8 text", path.display())))?;
    let keyset = Keyset::from_json(text)
        .map_err(|e| Error::stream(format!("keyset {}", path.display()), e))?;
    Ok((keyset, FileId::of(&meta)))
}

/// Writes the keyset to a new file with mode 0600, flushed to disk; fails if anything
/// exists at `path`. The file appears whole or not at all (see [`crate::output`]).
pub fn write_new(keyset: &Keyset, path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(Error::usage(format!(
            "{} already exists; keygen never overwrites a keyset",
            path.display()
        )));
    }
    let mut out = crate::output::OutputFile::create(path, false)?;
    let json = keyset.to_json();
    out.write_all(json.as_bytes())
        .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    out.commit(true)
}
