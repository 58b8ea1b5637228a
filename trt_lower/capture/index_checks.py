"""Index checks (part of stage 1, capture): ops that read or write at indices taken from data
raise where eager PyTorch raises, and never reach outside their input.

Before each such op the graph tests its indices (`ok = (low <= i) & (i < size)`), hands `all(ok)`
to `check_indices` (splitter/index_check.py: eager, it raises IndexOutOfRangeError naming the op
and the index; on a GPU it is a device assert) and gives the op `where(ok, i, 0)` instead of `i`. The test and the
clamp are ordinary ops: they run wherever the op runs, inside an engine too, so indices computed
inside an engine are covered as well as those an engine takes in, and TensorRT never sees an
index out of range (it reads out of bounds for one; ONNX Gather counts a negative one from the
end). Indices whose values all come from a constant (a weight, or views, slices and gathers
of one: BERT's position and token type ids) are checked here, once, and left alone.

Cost: the test's few elementwise ops and one more engine output, and the check's Python call
with a one-bool read (on a GPU, a device assert instead: no read); measured in
bench/bench_guards.py.

Ops left out, each unable to reach outside its input: embedding_bag's offsets (they bound the
bags' masks, no read is made at them), diagonal and as_strided (constant positions), boolean
masks (their shape is checked when tracing), and sort/topk/argmax (they produce indices).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Iterator

import torch
from torch._guards import detect_fake_mode
from torch.fx.node import map_arg

from splitter.index_check import INDEX_TEST, check_indices
from splitter.partition import NON_COMPUTE
from splitter.support import target_label

aten = torch.ops.aten

# Op -> (position of its index argument, position of its dim argument or None for dim 0,
# whether eager counts a negative index from the end).
_READS: dict[Any, tuple[int, int | None, bool]] = {
    aten.embedding.default: (1, None, False),
    aten.embedding_bag.padding_idx: (1, None, False),
    aten._embedding_bag.default: (1, None, False),
    aten._embedding_bag_forward_only.default: (1, None, False),
    aten.index_select.default: (2, 1, False),
    aten.gather.default: (2, 1, False),
    aten.scatter.src: (2, 1, False),
    aten.scatter.value: (2, 1, False),
    aten.index_copy.default: (2, 1, False),
    aten.index_fill.int_Scalar: (2, 1, True),
    aten.index_fill.int_Tensor: (2, 1, True),
}
# What names a node's place in the model: its line and its module.
_SOURCE_META = ("stack_trace", "nn_module_stack")
# x[i, j] and x[i, j] = v: a list of optional index tensors, one per leading dim.
_INDEXING = (aten.index.Tensor, aten.index_put.default)
_INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
# Ops whose result holds only values of their first input.
_SELECTIONS = NON_COMPUTE | {
    aten.gather.default,
    aten.index_select.default,
    aten.index.Tensor,
    aten.embedding.default,
    aten.expand_copy.default,
    aten.slice_copy.Tensor,
}


def _indices(node: torch.fx.Node) -> Iterator[tuple[tuple[int, int | None], torch.fx.Node, int, bool]]:
    """(where in the args, the index node, the dim it indexes, negatives count from the end) of
    each data-dependent integer index `node` reads at."""
    if node.target in _INDEXING:
        for position, index in enumerate(node.args[1]):  # type: ignore[arg-type]
            if isinstance(index, torch.fx.Node):
                yield (1, position), index, position, True
    elif node.target in _READS:
        at, dim_at, negative = _READS[node.target]
        index, dim = node.args[at], 0 if dim_at is None else node.args[dim_at]
        if isinstance(index, torch.fx.Node) and isinstance(dim, int):
            yield (at, None), index, dim, negative


def _val(graph: torch.fx.Graph, target: Any, args: tuple[Any, ...]) -> torch.fx.Node:
    """A node of `graph` calling `target` on `args`, its FakeTensor (or SymInt) computed as FX's
    would be."""
    node = graph.call_function(target, args)
    node.meta[INDEX_TEST] = True
    values = map_arg(args, lambda n: n.meta["val"])
    mode = detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])
    if mode is None:
        node.meta["val"] = target(*values)
    else:
        with mode:
            node.meta["val"] = target(*values)
    return node


def _constant_in_range(node: torch.fx.Node, low: Any, size: Any) -> bool:
    """Whether the values of index `node` are those of a weight (get_attr), or a selection of
    them, and that weight's lie in [low, size)."""
    while node.op == "call_function" and node.target in _SELECTIONS and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    if node.op != "get_attr" or not isinstance(size, int):
        return False
    try:
        value = functools.reduce(getattr, str(node.target).split("."), node.graph.owning_module)
    except AttributeError:
        return False
    return isinstance(value, torch.Tensor) and (
        value.numel() == 0 or (bool((value >= low).all()) and bool((value < size).all()))
    )


def _message(node: torch.fx.Node, index: torch.fx.Node, x: torch.fx.Node, dim: int, low: Any, size: Any) -> str:
    source = f"input '{index.name}'" if index.op == "placeholder" else f"index '{index.name}'"
    bound = str(size) if isinstance(size, int) else f"{x.name}.shape[{dim}]"
    lowest = str(low) if isinstance(low, int) else f"-{bound}"
    return (
        f"{target_label(node.target)} '{node.name}': {source} holds an index outside [{lowest}, {bound}) "
        f"(dim {dim} of '{x.name}'), as eager PyTorch refuses it (index out of range)"
    )


def _guarded(
    graph: torch.fx.Graph, node: torch.fx.Node, index: torch.fx.Node, dim: int, negative: bool
) -> torch.fx.Node | None:
    """The index `node` reads at, tested and clamped (nodes inserted before `node`); None when it
    needs no test."""
    x = node.args[0]
    assert isinstance(x, torch.fx.Node)
    shape = x.meta["val"].shape
    size = shape[dim] if shape else 1  # torch reads a 0-d tensor as 1-D
    low = -size if negative else 0
    val = index.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype not in _INT_DTYPES or _constant_in_range(index, low, size):
        return None
    before = node.prev
    with graph.inserting_before(node):
        if isinstance(size, torch.SymInt):
            size = _val(graph, aten.sym_size.int, (x, dim))
            low = _val(graph, operator.neg, (size,)) if negative else 0
        message = _message(node, index, x, dim, low, size.meta["val"] if isinstance(size, torch.fx.Node) else size)
        ok = _val(
            graph,
            aten.logical_and.default,
            (_val(graph, aten.ge.Scalar, (index, low)), _val(graph, aten.lt.Scalar, (index, size))),
        )
        graph.call_function(check_indices, (_val(graph, aten.all.default, (ok,)), message))
        safe = _val(graph, aten.where.ScalarOther, (ok, index, 0))
    _carry_source(before, node)
    return safe


def _carry_source(before: torch.fx.Node, node: torch.fx.Node) -> None:
    """The nodes between `before` and `node` get `node`'s source (module path and line): a profile
    or report row of the test and clamp points at the model's line that indexes."""
    added = before.next
    while added is not node:
        for key in _SOURCE_META:
            if key in node.meta:
                added.meta[key] = node.meta[key]
        added = added.next


def guard_indices(gm: torch.fx.GraphModule) -> None:
    """Test and clamp the indices of every op of `gm` that reads or writes at indices from data
    (this module's docstring)."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        args = list(node.args)
        changed = False
        for (at, position), index, dim, negative in list(_indices(node)):
            safe = _guarded(graph, node, index, dim, negative)
            if safe is None:
                continue
            if position is None:
                args[at] = safe
            else:
                args[at] = [*args[at][:position], safe, *args[at][position + 1 :]]
            changed = True
        if changed:
            node.args = tuple(args)
