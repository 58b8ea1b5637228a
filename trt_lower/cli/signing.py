"""`trt-lower keygen | sign`: make an Ed25519 key pair, sign a saved artifact (deploy/signing.py).
`trt-lower info` shows who signed a file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import BinaryIO

from trt_lower.cli.arguments import input_file, renamed
from trt_lower.cli.dispatch import UsageError
from trt_lower.deploy import signing


def keygen(args: argparse.Namespace) -> int:
    private, public = Path(f"{args.name}.pem"), Path(f"{args.name}.pub.pem")
    key = signing.generate(private, public)
    print(f"wrote {private} (private: keep it secret) and {public} (public: give it to those who load your files)")
    print(f"key {signing.fingerprint(key)}")
    return 0


def sign(args: argparse.Namespace) -> int:
    if args.sign_with is None:
        raise UsageError("give the private key to sign with: --sign-with PEM")
    target = Path(args.output or args.file)
    if not target.parent.is_dir():  # a typo in -o makes no directories
        raise FileNotFoundError(f"-o {target}: no such directory: {target.parent}")

    from trt_lower.deploy import artifact

    def check(copy: BinaryIO) -> None:  # only a complete trt_lower artifact, checksums verified, is signed
        artifact.read(args.file, copy)

    print(f"signed {target} with Ed25519 key {signing.sign_file(Path(args.file), target, Path(args.sign_with), check)}")
    return 0


def add_keygen_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="path and base name of the two files, e.g. keys/release")
    p.set_defaults(command_fn=keygen)


def add_sign_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    # Not required by argparse: its former spelling --key may give it instead.
    key = p.add_argument(
        "--sign-with",
        metavar="PEM",
        type=input_file,
        help="the Ed25519 private key, PEM (trt-lower keygen, or openssl genpkey); required",
    )
    renamed(p, "--key", key)
    p.add_argument("-o", "--output", help="write the signed file here (default: sign FILE in place)")
    p.set_defaults(command_fn=sign)
