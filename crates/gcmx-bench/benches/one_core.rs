//! gcmx's one-core benchmark beside the fastest published AES-GCM code; see the `gcmx_bench`
//! crate (`--help` for the options).

fn main() {
    #[cfg(target_arch = "x86_64")]
    gcmx_bench::main();
    #[cfg(not(target_arch = "x86_64"))]
    eprintln!("one_core: x86-64 only");
}
