#!/usr/bin/env python3
"""Regenerate vectors/gcm-spec.txt: test cases 1-18 of McGrew & Viega, "The Galois/Counter
Mode of Operation (GCM)" (revised submission to NIST, 2005, Appendix B).

The inputs (key, IV, AAD, plaintext) are those of the paper. Ciphertext and tag are *computed*
here with pyca/cryptography (OpenSSL's AES-GCM), and each computed tag is checked against the tag
published in the paper (PUBLISHED_TAGS below) -- the run fails if any differs, so a typo in an
input cannot slip through. Usage: python3 vectors/gen-gcm-spec.py > vectors/gcm-spec.txt
"""
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
import cryptography

K0_128 = "00" * 16
K0_192 = "00" * 24
K0_256 = "00" * 32
K_128 = "feffe9928665731c6d6a8f9467308308"
K_192 = K_128 + "feffe9928665731c"
K_256 = K_128 * 2
IV0 = "00" * 12
IV96 = "cafebabefacedbaddecaf888"
IV64 = "cafebabefacedbad"
IV480 = ("9313225df88406e555909c5aff5269aa6a7a9538534f7da1e4c303d2a318a728"
         "c3c0c95156809539fcf0e2429a6b525416aedbf5a0de6a57a637b39b")
P64 = ("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
       "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")
P60 = P64[: 60 * 2]
A20 = "feedfacedeadbeeffeedfacedeadbeefabaddad2"

# The tags printed in the paper, test cases 1..18.
PUBLISHED_TAGS = [
    "58e2fccefa7e3061367f1d57a4e7455a",
    "ab6e47d42cec13bdf53a67b21257bddf",
    "4d5c2af327cd64a62cf35abd2ba6fab4",
    "5bc94fbc3221a5db94fae95ae7121a47",
    "3612d2e79e3b0785561be14aaca2fccb",
    "619cc5aefffe0bfa462af43c1699d050",
    "cd33b28ac773f74ba00ed1f312572435",
    "2ff58d80033927ab8ef4d4587514f0fb",
    "9924a7c8587336bfb118024db8674a14",
    "2519498e80f1478f37ba55bd6d27618c",
    "65dcc57fcf623a24094fcca40d3533f8",
    "dcf566ff291c25bbb8568fc3d376a6d9",
    "530f8afbc74536b9a963b4f1c4cb738b",
    "d0d1c8a799996bf0265b98b5d48ab919",
    "b094dac5d93471bdec1a502270e3cc6c",
    "76fc6ece0f4e1768cddf8853bb2d551b",
    "3a337dbf46a792c45e454913fe2ea8f2",
    "a44a8266ee1c8eb0c8b5d4cf5ae9f19a",
]


def cases():
    out = []
    for k0, k in ((K0_128, K_128), (K0_192, K_192), (K0_256, K_256)):
        out.append((k0, IV0, "", ""))            # 1, 7, 13: empty message
        out.append((k0, IV0, "", "00" * 16))     # 2, 8, 14: one zero block
        out.append((k, IV96, "", P64))           # 3, 9, 15: 64-byte message, no AAD
        out.append((k, IV96, A20, P60))          # 4, 10, 16: 60-byte message, 20-byte AAD
        out.append((k, IV64, A20, P60))          # 5, 11, 17: 64-bit IV
        out.append((k, IV480, A20, P60))         # 6, 12, 18: 480-bit IV
    return out


def seal(key, iv, aad, pt):
    enc = Cipher(algorithms.AES(bytes.fromhex(key)), modes.GCM(bytes.fromhex(iv))).encryptor()
    enc.authenticate_additional_data(bytes.fromhex(aad))
    ct = enc.update(bytes.fromhex(pt)) + enc.finalize()
    return ct.hex(), enc.tag.hex()


def main():
    lines = [
        "# Test cases 1-18 of D. McGrew and J. Viega, \"The Galois/Counter Mode of Operation (GCM)\",",
        "# revised NIST submission (2005), Appendix B: AES-128 (1-6), AES-192 (7-12), AES-256 (13-18);",
        "# 96-bit IVs except cases 5/11/17 (64-bit IV) and 6/12/18 (480-bit IV); all tags 128 bits.",
        "# Cross-checked: ct and tag were computed from the paper's inputs with Python cryptography",
        f"# {cryptography.__version__} (OpenSSL AES-GCM) by vectors/gen-gcm-spec.py, and every computed tag",
        "# equals the tag printed in the paper. Format: one blank-line-separated block per case.",
        "",
    ]
    bad = 0
    for n, (key, iv, aad, pt) in enumerate(cases(), start=1):
        ct, tag = seal(key, iv, aad, pt)
        if tag != PUBLISHED_TAGS[n - 1]:
            print(f"test case {n}: computed tag {tag} != published {PUBLISHED_TAGS[n - 1]}",
                  file=sys.stderr)
            bad += 1
        lines += [f"[case {n}]", f"key = {key}", f"iv = {iv}", f"aad = {aad}", f"pt = {pt}",
                  f"ct = {ct}", f"tag = {tag}", ""]
    if bad:
        sys.exit(f"{bad} case(s) disagree with the paper")
    sys.stdout.write("\n".join(lines))


if __name__ == "__main__":
    main()
