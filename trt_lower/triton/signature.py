"""The tensors a Triton model of a lowered module declares: names, dtypes and dims.

Inputs come from what the module was lowered for (its input guard: names, dtypes, shape
ranges). Outputs are found by running the module: once at the optimal shapes, once with the batch
dim (dim 0 of every input) changed and once with the other varying dims changed, so an output dim
is fixed only if no input range moves it, and dim 0 is a batch dim only if it follows the inputs'.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import torch
from torch.utils import _pytree as pytree

from trt_lower.runtime.signature import TensorSig


@dataclass(frozen=True)
class TritonTensor:
    name: str
    dtype: torch.dtype
    dims: tuple[int, ...]  # the full shape, batch dim included; -1 where it varies


@dataclass(frozen=True)
class ModelSignature:
    inputs: tuple[TritonTensor, ...]
    outputs: tuple[TritonTensor, ...]
    # The batch sizes every input's dim 0 takes, or None when dim 0 is not a batch dim...
    batch_range: tuple[int, int] | None
    # ... and then why not.
    not_batchable: str = ""


def output_names(result: object) -> list[str]:
    """Names for the tensors of a module's (pytree) result, in flattening order: `output` for a
    single tensor, `output_<i>` for tuple items, dict keys and attribute names (joined by `_` when
    nested), made into identifiers."""
    names = []
    for path, _ in pytree.tree_flatten_with_path(result)[0]:
        parts = []
        for key in path:
            if isinstance(key, pytree.SequenceKey):
                parts.append(str(key.idx))
            elif isinstance(key, pytree.MappingKey):
                parts.append(str(key.key))
            else:
                parts.append(str(getattr(key, "name", key)))
        name = re.sub(r"\W", "_", "_".join(parts))
        names.append("output" if not name else f"output_{name}" if not name[0].isalpha() else name)
    if len(set(names)) != len(names):
        raise ValueError(f"the model's outputs flatten to clashing names {names}")
    return names


def output_tensors(result: object) -> list[torch.Tensor]:
    """The tensors of a module's result, in the order of `output_names`."""
    leaves = pytree.tree_leaves(result)
    bad = [type(v).__name__ for v in leaves if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"Triton outputs must be tensors; the model also returns {', '.join(bad)}")
    return leaves


def _other(lo: int, opt: int, hi: int) -> int:
    """A second size in [lo, hi] next to opt (opt itself when the dim is static)."""
    return opt + 1 if opt < hi else max(lo, opt - 1)


def _probe(module: torch.nn.Module, sigs: Sequence[TensorSig], shapes: Sequence[tuple[int, ...]],
           device: torch.device) -> object:
    tensors = [torch.randn(s).to(sig.dtype) if sig.dtype.is_floating_point else torch.zeros(s, dtype=sig.dtype)
               for sig, s in zip(sigs, shapes)]
    tensors = [t.to(device) for t in tensors]
    with torch.inference_mode():
        return module(*tensors)


def _batch_reason(sigs: Sequence[TensorSig]) -> str:
    if not sigs:
        return "the model has no inputs"
    for sig in sigs:
        if not sig.min_shape or sig.min_shape[0] == sig.max_shape[0]:
            return f"input '{sig.source}' was lowered for {sig.describe()}, without a varying dim 0"
    return ""


def signature(module: torch.nn.Module, sigs: Sequence[TensorSig], device: torch.device) -> ModelSignature:
    """Run `module` (lowered for the inputs `sigs`, taking them on `device`) to learn its outputs."""
    opt = [sig.opt_shape for sig in sigs]
    result = _probe(module, sigs, opt, device)
    names, base = output_names(result), output_tensors(result)
    reason = _batch_reason(sigs)
    # Shapes to run at besides opt: every varying dim moved (dim 0 on its own when it is a batch dim).
    moved = [tuple(_other(*r) for r in zip(s.min_shape, s.opt_shape, s.max_shape)) for s in sigs]
    probes = []
    if not reason:
        size = _other(max(s.min_shape[0] for s in sigs), opt[0][0], min(s.max_shape[0] for s in sigs))
        batched = output_tensors(_probe(module, sigs, [(size, *o[1:]) for o in opt], device))
        probes.append(batched)
        for name, a, b in zip(names, base, batched):
            if a.dim() == 0 or a.shape[0] != opt[0][0] or b.shape[0] != size:
                reason = f"output '{name}' does not follow the inputs' batch size in its dim 0"
                break
        moved = [(o[0], *m[1:]) for m, o in zip(moved, opt)]
    if moved != opt:
        probes.append(output_tensors(_probe(module, sigs, moved, device)))
    outputs = []
    for i, (name, t) in enumerate(zip(names, base)):
        shapes = {tuple(t.shape)} | {tuple(p[i].shape) for p in probes}
        dims = tuple(-1 if len({s[d] for s in shapes}) > 1 else t.shape[d] for d in range(t.dim()))
        outputs.append(TritonTensor(name, t.dtype, dims))
    inputs = tuple(TritonTensor(s.source, s.dtype, tuple(lo if lo == hi else -1 for lo, hi in zip(s.min_shape, s.max_shape)))
                   for s in sigs)
    batch_range = None if reason else (max(s.min_shape[0] for s in sigs), min(s.max_shape[0] for s in sigs))
    return ModelSignature(inputs, tuple(outputs), batch_range, reason)
