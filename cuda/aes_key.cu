// aes_key.cu -- key material on the device: AES key expansion, and each key's powers of H, for the keys
// and tables the other kernels read from device memory.
//
// MATH
//   FIPS-197 5.2: w[i] = w[i-Nk] ^ SubWord(RotWord(w[i-1])) ^ Rcon[i/Nk] when i % Nk == 0, with SubWord
//   alone when Nk = 8 and i % Nk == 4, else w[i] = w[i-Nk] ^ w[i-1]. gcmx_aes_expand_key (aes_bs.cuh)
//   does it with SubWord computed by the bitsliced S-box circuit: no table and no memory index or branch
//   that depends on the key (the branches are on the public word index and key length).
//
// MEMORY LAYOUT
//   raw[k] (GcmxRawKey, 36 bytes): the key's `len` bytes at the front of key[32]. out[k] (GcmxAesKey,
//   244 bytes): the expanded words, nr = 10/12/14, unused words zero. The host uploads raw keys from
//   page-locked memory it wipes, wipes the raw-key device buffer after this kernel, and keeps `out` in a
//   device buffer that it wipes before freeing it: the expanded key never exists in host memory.
//
//   key_powers[k] (GcmxKeyPowers, 2560 bytes): q[i-1] = Q_i = H' h^(i-1) for i = 1..128 and pow2[i] =
//   Q_(2^i) for i = 0..31, with H = AES_K(0^128) and H' = mulX(H) (ghash.cuh: the POLYVAL form of GHASH's
//   key): 127 products and 31 squarings per key. H never leaves the thread's registers.
//
// KERNELS
//   gcmx_aes_expand_keys(GcmxExpandParams): thread k expands key k (k < nkeys).
//   Launch: grid = ceil(nkeys / GCMX_EXPAND_THREADS), block = GCMX_EXPAND_THREADS (gcmx_abi.h).
//   gcmx_key_powers(GcmxKeyPowersParams): thread k fills key_powers[k] from the expanded key k.
//   Launch: grid = ceil(nkeys / GCMX_KEY_POWERS_THREADS), block = GCMX_KEY_POWERS_THREADS.
#include "ghash.cuh"
#include "aes_bs.cuh"

extern "C" __global__ void __launch_bounds__(GCMX_EXPAND_THREADS) gcmx_aes_expand_keys(GcmxExpandParams p)
{
    const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.nkeys) return;
    const GcmxRawKey* raw = reinterpret_cast<const GcmxRawKey*>(p.raw) + k;
    gcmx_aes_expand_key(raw->key, raw->len, reinterpret_cast<GcmxAesKey*>(p.out) + k);
}

extern "C" __global__ void __launch_bounds__(GCMX_KEY_POWERS_THREADS) gcmx_key_powers(GcmxKeyPowersParams p)
{
    const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.nkeys) return;
    const GcmxAesCtrKey aes = {reinterpret_cast<const GcmxAesKey*>(p.keys) + k, 0u, 0u, 0u};
    gcmx_key_powers_thread<GCMX_DEFAULT_CLMAD>(aes, reinterpret_cast<GcmxKeyPowers*>(p.key_powers)[k]);
}
