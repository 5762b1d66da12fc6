#!/usr/bin/env python3
"""Run every ```sh block of README.md as written, so the README stays true.

    scripts/readme-check.py            (scripts/test.sh runs it after building the CLI)

Each block runs in `bash -euo pipefail`, with target/release (the `gcmx` binary) first on PATH:
blocks that call `cargo` or `scripts/` run in the repository, the others in a new empty temporary
folder, as a user would run them there. The block that runs `scripts/test.sh` is the
command that runs this check, so it is named and not run again. Rust blocks are compiled and run
by `cargo test` (README.md is a doctest of the gcmx crate); ```text blocks are commands for
other machines (a CUDA machine) and are not run here.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def blocks(text):
    for m in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.S | re.M):
        yield m.group(1), m.group(2), text[: m.start()].count("\n") + 1


def main():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    env = dict(os.environ)
    env["PATH"] = os.path.join(ROOT, "target", "release") + os.pathsep + env["PATH"]
    ran = skipped = 0
    for lang, body, line in blocks(readme):
        if lang != "sh":
            continue
        if "scripts/test.sh" in body:
            print(f"README.md:{line}: not run here: it runs scripts/test.sh, the command running this check")
            skipped += 1
            continue
        in_repo = re.search(r"(^|\s)(cargo|scripts/)", body, re.M) is not None
        with tempfile.TemporaryDirectory(prefix="gcmx-readme-") as tmp:
            cwd = ROOT if in_repo else tmp
            where = "the repository" if in_repo else "an empty folder"
            print(f"README.md:{line}: running the block in {where}")
            r = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", body],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            out = "\n".join("    " + l for l in r.stdout.strip().splitlines()[-15:])
            if out:
                print(out)
            if r.returncode != 0:
                sys.exit(f"readme-check: the block at README.md:{line} failed with exit {r.returncode}")
        ran += 1
    print(f"readme-check: {ran} shell blocks ran as written, {skipped} named above")


if __name__ == "__main__":
    main()
