//! One call of each kind through gcmx's public API, each between two markers (a `sched_yield`
//! system call before and after), for `scripts/aarch64.sh mca`: it runs this program under
//! qemu-user with the executed code logged, cuts each call's instruction trace out at the
//! markers, and models the trace's cycles with llvm-mca (whole calls: framing, J0, the kernels
//! and the tag, not only the main loop).
//!
//! The calls: seal and open of a 1 KiB message (12-byte nonce, no associated data), with
//! AES-128 and AES-256 keys, on `Backend::Cpu`; each once before its marked run, so that the
//! marked run is not the first (the model assumes warm caches anyway).

use gcmx::{Backend, Gcm};

fn marker() {
    std::thread::yield_now();
}

fn main() {
    let len: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    for key_len in [16usize, 32] {
        let gcm = Gcm::with_backend(&vec![7u8; key_len], Backend::Cpu).expect("key");
        let mut buf = vec![1u8; len];
        let mut tag = [0u8; 16];
        let nonce = [9u8; 12];
        gcm.encrypt_detached(&nonce, b"", &mut buf, &mut tag)
            .expect("seal");
        gcm.decrypt_detached(&nonce, b"", &mut buf, &tag)
            .expect("open");
        println!("AES-{} seal {len}", key_len * 8);
        marker();
        gcm.encrypt_detached(&nonce, b"", &mut buf, &mut tag)
            .expect("seal");
        marker();
        println!("AES-{} open {len}", key_len * 8);
        marker();
        gcm.decrypt_detached(&nonce, b"", &mut buf, &tag)
            .expect("open");
        marker();
    }
}
