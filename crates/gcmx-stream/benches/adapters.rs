//! The adapters beside `gcmx::Gcm` batches (filled in by a later commit).
fn main() {}
