"""An attacker's edits to a saved artifact: open it, change its manifest or members, write it back
with checksums that match (whoever writes the file writes its checksums too), stored or, where
asked, compressed. The tests of the reader's rules read as the attacks they are."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any, Callable

import onnx

from trt_lower.deploy import artifact

Change = Callable[[dict[str, Any], dict[str, bytes]], None]


def tamper(
    source: Path,
    target: Path,
    change: Change,
    *,
    checksums: bool = True,
    compression: int = zipfile.ZIP_STORED,
    manifest_text: Callable[[str], str] | None = None,
) -> Path:
    """A copy of `source` with `change(manifest, members)` applied; every member's checksum made
    to match its new bytes (unless `checksums` is False: a careless forger, or a damaged file);
    members written with `compression`; the manifest's JSON text passed through `manifest_text`."""
    with zipfile.ZipFile(source) as z:
        members = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(members.pop(artifact.MANIFEST))
    change(manifest, members)
    if checksums:
        manifest["sha256"] = {n: hashlib.sha256(d).hexdigest() for n, d in members.items()}
    text = json.dumps(manifest)
    with zipfile.ZipFile(target, "w", compression) as z:
        z.writestr(artifact.MANIFEST, manifest_text(text) if manifest_text else text)
        for name, data in members.items():
            z.writestr(name, data)
    return target


def edit_onnx(member: str, edit: Callable[[onnx.ModelProto], None]) -> Change:
    """A change that rewrites the ONNX model in `member`."""

    def change(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        model = onnx.load_from_string(members[member])
        edit(model)
        members[member] = model.SerializeToString()

    return change


def node(manifest: dict[str, Any], op: str, nth: int = 0) -> dict[str, Any]:
    """The stored graph's `nth` node of kind `op` (placeholder, call_function, ...)."""
    return [n for n in manifest["graph"]["nodes"] if n["op"] == op][nth]
