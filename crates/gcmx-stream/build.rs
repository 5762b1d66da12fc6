//! Declares the `docsrs` cfg that docs.rs sets (`[package.metadata.docs.rs]`), so that
//! `#[cfg_attr(docsrs, ...)]` passes the `unexpected_cfgs` lint while the crate keeps the
//! workspace's lint table.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(docsrs)");
}
