#!/usr/bin/env python3
"""Google Tink's streaming AEAD (PyPI package `tink`), driven by gcmx's interop tests.

Usage:
  tink_helper.py version
  tink_helper.py keygen KEY_BYTES SEGMENT_SIZE OUT_KEYSET
  tink_helper.py encrypt KEYSET AAD_HEX INPUT OUTPUT
  tink_helper.py decrypt KEYSET AAD_HEX INPUT OUTPUT
  tink_helper.py batch JOBS_FILE

A batch file has one job a line, 'encrypt|decrypt<TAB>KEYSET<TAB>AAD_HEX<TAB>INPUT<TAB>OUTPUT';
for each job, one line is printed: 'ok' or 'refused: REASON' (one Python start for many jobs).

INPUT and OUTPUT may be '-' for standard input and output. Keysets are Tink cleartext JSON
keysets, read with tink.cleartext_keyset_handle and tink.JsonKeysetReader. Exit status 0 on
success, 1 on a refusal (message on stderr), 3 if tink cannot be imported.
"""

import io
import sys
import warnings

try:
    import tink
    from tink import cleartext_keyset_handle, streaming_aead
except ImportError as exc:  # pragma: no cover - reported to the Rust test
    sys.stderr.write(
        "the Python package 'tink' is not importable (%s); install it with: "
        "python3 -m pip install tink\n" % exc
    )
    sys.exit(3)

streaming_aead.register()


def _version():
    try:
        from importlib.metadata import version

        return version("tink")
    except Exception:  # noqa: BLE001
        return "unknown"


def _read_keyset(path):
    with open(path, "r", encoding="utf-8") as f:
        text = f.read()
    return cleartext_keyset_handle.read(tink.JsonKeysetReader(text))


def _primitive(path):
    return _read_keyset(path).primitive(streaming_aead.StreamingAead)


def _open_in(name):
    if name == "-":
        return sys.stdin.buffer
    return open(name, "rb")


def _write_out(name, data):
    if name == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        with open(name, "wb") as f:
            f.write(data)


class _KeepOpen(io.BytesIO):
    """Tink closes the destination stream; keep the bytes readable afterwards."""

    def close(self):
        pass


def keygen(key_bytes, segment_size, out):
    from tink.proto import common_pb2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        template = streaming_aead.streaming_aead_key_templates.create_aes_gcm_hkdf_streaming_key_template(
            aes_key_size=int(key_bytes),
            hash_type=common_pb2.SHA256,
            derived_key_size=int(key_bytes),
            ciphertext_segment_size=int(segment_size),
        )
    handle = tink.new_keyset_handle(template)
    buf = io.StringIO()
    cleartext_keyset_handle.write(tink.JsonKeysetWriter(buf), handle)
    with open(out, "x", encoding="utf-8") as f:
        f.write(buf.getvalue())


def encrypt(keyset, aad_hex, inp, out):
    primitive = _primitive(keyset)
    src = _open_in(inp)
    dst = _KeepOpen()
    with primitive.new_encrypting_stream(dst, bytes.fromhex(aad_hex)) as enc:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            enc.write(chunk)
    _write_out(out, dst.getvalue())


def decrypt(keyset, aad_hex, inp, out):
    primitive = _primitive(keyset)
    src = _open_in(inp)
    parts = []
    with primitive.new_decrypting_stream(src, bytes.fromhex(aad_hex)) as dec:
        while True:
            chunk = dec.read(1 << 20)
            if not chunk:
                break
            parts.append(chunk)
    _write_out(out, b"".join(parts))


def batch(jobs_file):
    with open(jobs_file, "r", encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    for line in lines:
        op, keyset, aad_hex, inp, out = line.split("\t")
        try:
            (encrypt if op == "encrypt" else decrypt)(keyset, aad_hex, inp, out)
            print("ok")
        except Exception as exc:  # noqa: BLE001 - any refusal is reported, not raised
            print("refused: %s: %s" % (type(exc).__name__, str(exc).replace("\n", " ")))
    sys.stdout.flush()


def main(argv):
    if len(argv) >= 1 and argv[0] == "version":
        print(_version())
        return 0
    if len(argv) == 4 and argv[0] == "keygen":
        keygen(*argv[1:])
        return 0
    if len(argv) == 2 and argv[0] == "batch":
        batch(argv[1])
        return 0
    if len(argv) == 5 and argv[0] in ("encrypt", "decrypt"):
        try:
            (encrypt if argv[0] == "encrypt" else decrypt)(*argv[1:])
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write("tink refused: %s: %s\n" % (type(exc).__name__, exc))
            return 1
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
