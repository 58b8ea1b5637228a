"""Which of the model's own tensors (by its state dict's names) each weight of a weight-stripped
artifact is, so that load(path, weights=model.state_dict()) can fill the artifact: found the way
update_weights derives weights (rederive.py: the captured graph split and converted again), run
once with every float and int8 tensor moved (a probe). An engine weight that moved the way one
tensor moved is that tensor (in the engine's dtype); one that did not move is a constant of the
conversion; one that moved otherwise is computed from the weights by conversion (say a quantized
weight), which a load cannot redo without the captured graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from converters.core.dtypes import ONNX_TYPES, numpy_view
from trt_lower.api import Lowering
from trt_lower.deploy.separate_weights import EAGER, WEIGHT_TYPES, StateNames
from trt_lower.refit.errors import WeightUpdateError
from trt_lower.refit.rederive import rederive
from trt_lower.refit.state import frozen
from trt_lower.stitch.lowered import LoweredModule

_TORCH_TYPES = {t: d for d, t in ONNX_TYPES.items()}
# How many elements _is compares before the whole tensor.
_HEAD = 16


def _moved(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """`tensor` with every element moved at random (float and int8 ones; others as they are). A
    float keeps its sign, as converters may take a positive scale only where it is one; zeros move
    up a little, so that two all-zero biases still tell apart."""
    if tensor.is_floating_point():  # computed in float64: torch has no arithmetic on FP8
        factor = 1.5 + torch.rand(tensor.shape, generator=generator, dtype=torch.float64)
        lift = 1e-2 * torch.rand(tensor.shape, generator=generator, dtype=torch.float64)
        return (tensor.detach().double() * factor + lift).to(tensor.dtype)
    if tensor.dtype == torch.int8:
        step = torch.randint(1, 255, tensor.shape, generator=generator, dtype=torch.int16)
        return ((tensor.detach().to(torch.int16) + 128 + step) % 256 - 128).to(torch.int8)
    return tensor.detach()


def _is(tensor: torch.Tensor, array: NDArray[Any], dtype: torch.dtype) -> bool:
    """Whether `array` is `tensor` cast to `dtype`: its first elements first, as most tensors of a
    model share their shape with many others."""
    if tuple(tensor.shape) != array.shape:
        return False
    head = numpy_view(tensor.reshape(-1)[:_HEAD].to(dtype).contiguous())
    if not np.array_equal(head, array.reshape(-1)[:_HEAD]):
        return False
    return bool(np.array_equal(numpy_view(tensor.to(dtype).contiguous()), array))


def state_names(lowered: LoweredModule) -> StateNames | None:
    """The names of `lowered`'s weights in its model's state dict; None for a module that holds no
    captured graph (trt_lower.load made it) or whose graph changes with moved weights."""
    lowering = lowered.lowering
    if not isinstance(lowering, Lowering):
        return None
    program = lowering.captured.program
    tensors = frozen(program)
    generator = torch.Generator().manual_seed(0)
    probe = {k: _moved(t.cpu(), generator) for k, t in tensors.items()}
    try:
        moved = rederive(lowered, lowering, probe, expected=())  # expected given: no eager run
    except WeightUpdateError:
        return None
    sources: dict[str, str] = {}
    literals, derived = set(), set()
    for name, segment in moved.segments.items():
        old = lowered.segments[name].onnx
        new = {i.name: i for i in segment.onnx.model.graph.initializer}
        for init in old.model.graph.initializer:
            if init.data_type not in WEIGHT_TYPES:
                continue
            key, before = f"{name}/{init.name}", old.values(init)
            after = segment.onnx.values(new[init.name])
            if np.array_equal(before, after, equal_nan=True):  # a NaN constant (hypot's) did not move
                literals.add(key)
                continue
            same = [k for k, t in probe.items() if _is(t, after, _TORCH_TYPES[init.data_type])]
            if len(same) == 1:
                sources[key] = same[0]
            else:
                derived.add(key)
    for node in lowered.graph.find_nodes(op="get_attr"):
        target = str(node.target)
        if target in tensors:  # eager nodes read the model's tensors by the model's names
            sources[EAGER + target] = target
    return StateNames(
        sources=sources,
        state={k: (t.dtype, tuple(t.shape)) for k, t in tensors.items()},
        required=frozenset(program.state_dict),
        literals=frozenset(literals),
        derived=frozenset(derived),
        layouts=dict(lowering.captured.shards),
    )
