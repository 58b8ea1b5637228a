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
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils import _pytree as pytree

from trt_lower.values.signature import EngineInputError, TensorSig


@dataclass(frozen=True)
class TritonTensor:
    name: str
    dtype: torch.dtype
    dims: tuple[int, ...]  # the full shape, batch dim included; -1 where it varies
    optional: bool = False  # a request may leave it out


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


def _others(lo: int, opt: int, hi: int) -> list[int]:
    """Sizes in [lo, hi] besides opt, nearest first, larger first at a tie ([opt] when the dim is
    static)."""
    near = [v for v in range(max(lo, opt - _TRIES), min(hi, opt + _TRIES) + 1) if v != opt]
    return sorted(near, key=lambda v: (abs(v - opt), -v)) or [opt]


# Sizes tried, around opt, for a probe that meets the model's size conditions.
_TRIES = 8


def _probe_any(
    module: torch.nn.Module, sigs: Sequence[TensorSig], options: Sequence[list[tuple[int, ...]]], device: torch.device
) -> tuple[list[tuple[int, ...]], list[torch.Tensor]]:
    """The first of `options` (input shapes) the module's guard takes, and its outputs: a model
    captured under size conditions (`x.shape[0] % 2 == 0`) refuses the others."""
    for shapes in options:
        try:
            return shapes, output_tensors(_probe(module, sigs, shapes, device))
        except EngineInputError:
            continue
    raise ValueError(
        f"no input shapes near the optimal ones meet the model's size conditions (tried {list(options)}); "
        "the outputs' shapes cannot be learnt by running it"
    )


def _probe(
    module: torch.nn.Module, sigs: Sequence[TensorSig], shapes: Sequence[tuple[int, ...]], device: torch.device
) -> object:
    return _run(module, _examples(sigs, shapes, device))


def _examples(sigs: Sequence[TensorSig], shapes: Sequence[tuple[int, ...]], device: torch.device) -> list[torch.Tensor]:
    tensors = [
        torch.randn(s).to(sig.dtype) if sig.dtype.is_floating_point else torch.zeros(s, dtype=sig.dtype)
        for sig, s in zip(sigs, shapes)
    ]
    return [t.to(device) for t in tensors]


def _run(module: torch.nn.Module, tensors: Sequence[torch.Tensor]) -> object:
    with torch.inference_mode():
        return module(*tensors)


def _mixed_rows(
    module: torch.nn.Module,
    sigs: Sequence[TensorSig],
    shapes: Sequence[tuple[int, ...]],
    names: Sequence[str],
    device: torch.device,
) -> str:
    """Why dim 0 is no batch dim although the shapes follow it: an output's first row changes
    when the other rows go (a sequence-first model's dim 0), and Triton's batcher would mix
    requests; '' where the first row alone gives the same first rows (or this cannot be tried:
    batch 1 outside the range, or refused by a size condition)."""
    if shapes[0][0] < 2 or any(s.min_shape[0] > 1 for s in sigs):
        return ""
    tensors = _examples(sigs, shapes, device)
    try:
        whole, first = (output_tensors(_run(module, ts)) for ts in (tensors, [t[:1] for t in tensors]))
    except EngineInputError:
        return ""
    for name, w, f in zip(names, whole, first):
        w = w[:1]
        if w.shape != f.shape:
            same = False
        elif w.is_floating_point():
            scale = max(float(w.abs().nan_to_num(0.0, 0.0, 0.0).max()) if w.numel() else 0.0, 1.0)
            same = torch.allclose(w, f, rtol=1e-3, atol=1e-4 * scale, equal_nan=True)
        else:
            same = torch.equal(w, f)
        if not same:
            return (
                f"output '{name}' of the first item along dim 0 changes with the other items (dim 0 is not "
                "a batch dim: Triton's batcher would mix requests)"
            )
    return ""


def _data_dependent_dims(module: torch.nn.Module, count: int) -> list[set[int]]:
    """Per output, the dims a size the data decides sets (`nonzero`), from the graph's metadata
    where the module has it (a module loaded from an artifact has none: its probes decide)."""
    graph = getattr(module, "graph", None)
    output = next((n for n in reversed(graph.nodes) if n.op == "output"), None) if graph is not None else None
    leaves = pytree.tree_leaves(output.args[0]) if output is not None else []
    if len(leaves) != count:
        return [set() for _ in range(count)]
    vals = [leaf.meta.get("val") if isinstance(leaf, torch.fx.Node) else None for leaf in leaves]
    return [
        {d for d, size in enumerate(v.shape) if free_unbacked_symbols(size)} if isinstance(v, torch.Tensor) else set()
        for v in vals
    ]


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
    others = [[_others(*r) for r in zip(s.min_shape, s.opt_shape, s.max_shape)] for s in sigs]
    moved = [[tuple(d[min(k, len(d) - 1)] for d in dims) for dims in others] for k in range(_TRIES)]
    probes = []
    if not reason:
        sizes = _others(max(s.min_shape[0] for s in sigs), opt[0][0], min(s.max_shape[0] for s in sigs))
        shapes, batched = _probe_any(module, sigs, [[(size, *o[1:]) for o in opt] for size in sizes], device)
        size = shapes[0][0]
        probes.append(batched)
        for name, a, b in zip(names, base, batched):
            if a.dim() == 0 or a.shape[0] != opt[0][0] or b.shape[0] != size:
                reason = f"output '{name}' does not follow the inputs' batch size in its dim 0"
                break
        reason = reason or _mixed_rows(module, sigs, opt if opt[0][0] >= 2 else shapes, names, device)
        moved = [[(o[0], *m[1:]) for m, o in zip(option, opt)] for option in moved]
    moved = [option for option in moved if option != opt]
    if moved:
        probes.append(_probe_any(module, sigs, moved, device)[1])
    outputs = []
    decided = _data_dependent_dims(module, len(base))
    for i, (name, t) in enumerate(zip(names, base)):
        seen = {tuple(t.shape)} | {tuple(p[i].shape) for p in probes}
        # Triton takes a dim >= 1 or -1: varying, data-dependent (probes of zeros may not vary
        # it) and empty dims are -1.
        dims = tuple(
            -1 if len({s[d] for s in seen}) > 1 or d in decided[i] or t.shape[d] == 0 else t.shape[d]
            for d in range(t.dim())
        )
        outputs.append(TritonTensor(name, t.dtype, dims))
    inputs = tuple(
        TritonTensor(s.source, s.dtype, tuple(lo if lo == hi else -1 for lo, hi in zip(s.min_shape, s.max_shape)))
        for s in sigs
    )
    batch_range = None if reason else (max(s.min_shape[0] for s in sigs), min(s.max_shape[0] for s in sigs))
    return ModelSignature(inputs, tuple(outputs), batch_range, reason)
