//! Test support for gcmx-cuda (a dev-dependency of its tests; not published, not part of the library).
//!
//! gcmx's stub libcuda (`crates/gcmx-cuda/stub/libcuda_stub.c`, built by `scripts/setup-cuda.sh` into
//! `.toolchain/cuda-stub/libcuda.so.1`) stands in for the CUDA driver when it is the `libcuda.so.1`
//! that the loader finds (`LD_LIBRARY_PATH`). It answers "no device", emulates a device in host memory
//! once [`fault::emulate`] switches it on, or forwards every entry point to the real driver named by
//! `GCMX_STUB_DRIVER` (an absolute path) on a GPU machine. In each mode it can make chosen driver calls
//! fail (a fault table with a counter per kind of call). [`fault`] wraps its controls, found in the
//! loaded libcuda by name; with a real driver loaded directly (no stub) there are none, which
//! [`fault::stub_loaded`] tells.

pub mod fault;
