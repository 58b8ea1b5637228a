"""The weight file of a weights="separate" artifact under its signature: the artifact's manifest
records a digest of the weights it was saved with, so the signature (over the manifest) covers
them. Under trusted keys the weights given at load must be those (a weight file swapped beside a
signed artifact is refused); without, any weights of the right keys, dtypes and shapes load (a
fine-tuned copy: separate_weights.py).

The digest is of the tensors as read (each key, dtype, shape and bytes), not of the file's bytes:
it is what runs that is checked, read once, and a state dict of the same tensors matches too.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

import torch

# The manifest's separate_weights record's field holding the digest.
FIELD = "sha256"


def digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors in key order: each key, dtype, shape and bytes."""
    hashing = hashlib.sha256()
    for key in sorted(tensors):
        tensor = tensors[key]
        hashing.update(f"{len(key)}:{key}\0{tensor.dtype}\0{list(tensor.shape)}\0".encode())
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        hashing.update(flat.view(torch.uint8).numpy().data)
    return hashing.hexdigest()


def record(entry: dict[str, Any], tensors: Mapping[str, torch.Tensor]) -> None:
    """Add the digest of the weights saved to the manifest's separate_weights `entry`."""
    entry[FIELD] = digest(tensors)


def refusal(entry: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], where: str) -> str | None:
    """Why the weights `tensors` (from `where`) may not run a signed artifact whose manifest's
    separate_weights record is `entry`, or None: they are the weights it was signed with."""
    recorded = entry.get(FIELD)
    if not isinstance(recorded, str):
        return (
            "its signature does not cover its weight file (saved by an older trt_lower, without the "
            "weights' digest): save it again and sign it, to load it under trusted keys"
        )
    if digest(tensors) != recorded:
        return (
            f"the weights in {where} are not those it was signed with (their digest differs from the one "
            "its signed manifest records); under trusted keys only the signed weights load"
        )
    return None
