"""For targets written at opset 23: the elementwise forms of RMS norm and rotary embeddings that
models write, each replaced by the one op its ONNX fused op is converted from (RMSNormalization,
RotaryEmbedding: TensorRT's own layers from 10.15). Other targets keep the graph as captured,
so their ONNX does not change.

Matches come from torch.fx's SubgraphMatcher, every literal of a pattern a placeholder (so any
value matches); each match is then checked (axes, slice bounds, that cos/sin hold each value
twice as a cache of a whole head does) and left as it is where a check fails.
- RMS norm, LlamaRMSNorm's: x * rsqrt(mean(x ** 2, -1, keepdim) + eps) [* weight] ->
  aten.rms_norm (with LlamaRMSNorm's casts to and from float32 in a half-precision model, the
  float32 part; the weight then stays a multiplication).
- Rotary embeddings: x * cos + rotate(x) * sin, rotate being Llama's rotate_half (halves swapped,
  the first negated) or GPT-J's rotate-every-two (neighbours) -> trt_lower::rotary_embedding with
  the half caches (converters/ops/rotary.py), for x of (batch, heads, seq, head_dim) or
  (batch, seq, heads, head_dim) (transposed around it).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.fx import Graph, Node
from torch.fx.passes.utils.matcher_utils import InternalMatch, SubgraphMatcher

from converters.core.target import TrtTarget
from converters.ops.rotary import FUSED_OPSET

aten = torch.ops.aten
_END = 2**63 - 1
# Ops that keep every element where it is along the last axis (with a scalar other operand).
_ELEMENTWISE = frozenset(
    {
        aten.cos.default,
        aten.sin.default,
        aten.neg.default,
        aten.clone.default,
        aten.alias.default,
        aten._to_copy.default,
    }
)
_BY_SCALAR = frozenset({aten.mul.Tensor, aten.div.Tensor, aten.mul.Scalar, aten.div.Scalar})
_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default})


def fuse(gm: torch.fx.GraphModule, trt_target: TrtTarget) -> None:
    """Rewrite `gm` in place for `trt_target` (nothing below opset 23)."""
    if trt_target.opset < FUSED_OPSET:
        return
    changed = False
    for swap in (False, True):
        changed |= _rewrite(gm.graph, _rms_pattern(swap), _rms_norm)
        changed |= _rewrite(gm.graph, _rms_weight_pattern(swap), _rms_weight)
    for interleaved, *swaps in itertools.product((False, True), repeat=4):
        changed |= _rewrite(
            gm.graph, _rotary_pattern(interleaved, *swaps), functools.partial(_rotary, interleaved=interleaved)
        )
    if changed:
        gm.recompile()


# -- matching ----------------------------------------------------------------------------------
Named = dict[str, Node]


def _rewrite(graph: Graph, pattern: tuple[Graph, Named], replace: Callable[[Graph, Named], Node | None]) -> bool:
    """Replace each match of `pattern` for which `replace` (given the matched nodes by their
    pattern names) builds a replacement; the match's other nodes go."""
    pattern_graph, names = pattern
    changed = False
    for match in SubgraphMatcher(pattern_graph).match(graph):
        found = {name: match.nodes_map[node] for name, node in names.items()}
        out, before = found["out"], set(graph.nodes)
        with graph.inserting_before(out):
            new = replace(graph, found)
        if new is None or str(_val(new).stride()) != str(_val(out).stride()):
            # Refused, or laid out otherwise in memory than the match's result, which the graph's
            # later views were traced against.
            for node in reversed([n for n in graph.nodes if n not in before]):
                graph.erase_node(node)
            continue
        new.meta = {**out.meta, **new.meta}  # the model's source and module path for the report
        out.replace_all_uses_with(new)
        _erase(graph, pattern_graph, match)
        changed = True
    return changed


def _erase(graph: Graph, pattern_graph: Graph, match: InternalMatch) -> None:
    """The match's nodes, last first (the pattern's order is the graph's)."""
    for p in reversed(pattern_graph.nodes):
        node = match.nodes_map.get(p)
        if p.op not in ("placeholder", "output") and node is not None and not node.users:
            graph.erase_node(node)


def _call(graph: Graph, op: Any, *args: Any) -> Node:
    """A call_function node of `op`, its meta["val"] computed on the arguments' FakeTensors."""
    node = graph.call_function(op, args)
    node.meta["val"] = op(*(a.meta["val"] if isinstance(a, Node) else a for a in args))
    return node


def _pattern(build: Callable[[Graph, Named, Callable[[], Node]], Node]) -> tuple[Graph, Named]:
    """A pattern graph from `build(graph, names, any)`: `any()` is a placeholder standing for a
    literal (checked after matching); `names` the nodes the replacement reads."""
    graph, names = Graph(), Named()
    count = itertools.count()
    names["out"] = build(graph, names, lambda: graph.placeholder(f"any_{next(count)}"))
    graph.output(names["out"])
    return graph, names


def _ordered(a: Node, b: Node, swap: bool) -> tuple[Node, Node]:
    return (b, a) if swap else (a, b)


def _val(node: object) -> Any:
    return node.meta.get("val") if isinstance(node, Node) else None


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Shapes known equal (compared as text: comparing sizes that vary would add guards)."""
    return str(tuple(a.shape)) == str(tuple(b.shape))


def _last(dim: object, rank: int) -> bool:
    return isinstance(dim, int) and dim in (-1, rank - 1)


# -- RMS norm ----------------------------------------------------------------------------------
def _rms_pattern(swap: bool) -> tuple[Graph, Named]:
    def build(g: Graph, n: Named, any_: Callable[[], Node]) -> Node:
        n["x"] = g.placeholder("x")
        n["pow"] = g.call_function(aten.pow.Tensor_Scalar, (n["x"], any_()))
        n["mean"] = g.call_function(aten.mean.dim, (n["pow"], any_(), any_()))
        n["add"] = g.call_function(aten.add.Tensor, (n["mean"], any_()))
        rsqrt = g.call_function(aten.rsqrt.default, (n["add"],))
        return g.call_function(aten.mul.Tensor, _ordered(n["x"], rsqrt, swap))

    return _pattern(build)


def _rms_norm(graph: Graph, n: Named) -> Node | None:
    x = _val(n["x"])
    eps = n["add"].args[1]
    if not (isinstance(x, torch.Tensor) and x.dtype.is_floating_point and isinstance(x.shape[-1], int)):
        return None
    if n["pow"].args[1] != 2 or not isinstance(eps, (int, float)) or isinstance(eps, bool):
        return None
    dims, keepdim = n["mean"].args[1], n["mean"].args[2] if len(n["mean"].args) > 2 else False
    if not (
        keepdim is True
        and isinstance(dims, (list, tuple))
        and len(dims) == 1
        and _last(dims[0], x.dim())
        and n["mean"].kwargs.get("dtype") is None
        and len(n["add"].kwargs) == 0
    ):
        return None
    return _call(graph, aten.rms_norm.default, n["x"], [x.shape[-1]], None, float(eps))


def _rms_weight_pattern(swap: bool) -> tuple[Graph, Named]:
    def build(g: Graph, n: Named, any_: Callable[[], Node]) -> Node:
        n["x"], n["weight"] = g.placeholder("x"), g.placeholder("weight")
        n["norm"] = g.call_function(aten.rms_norm.default, (n["x"], any_(), any_(), any_()))
        return g.call_function(aten.mul.Tensor, _ordered(n["weight"], n["norm"], swap))

    return _pattern(build)


def _rms_weight(graph: Graph, n: Named) -> Node | None:
    """rms_norm(x) * weight -> rms_norm(x, weight), for a weight of the normalized shape and dtype."""
    norm, weight = n["norm"], _val(n["weight"])
    x, shape = norm.args[:2]
    given = norm.args[2] if len(norm.args) > 2 else norm.kwargs.get("weight")
    eps = norm.args[3] if len(norm.args) > 3 else norm.kwargs.get("eps")
    if given is not None or not isinstance(weight, torch.Tensor):
        return None
    if not isinstance(shape, (list, tuple)) or list(weight.shape) != list(shape) or weight.dtype != _val(x).dtype:
        return None
    return _call(graph, aten.rms_norm.default, x, shape, n["weight"], eps)


# -- rotary embeddings -------------------------------------------------------------------------
def _rotary_pattern(interleaved: bool, swap_cos: bool, swap_sin: bool, swap_add: bool) -> tuple[Graph, Named]:
    def build(g: Graph, n: Named, any_: Callable[[], Node]) -> Node:
        n["x"], n["cos"], n["sin"] = (g.placeholder(name) for name in ("x", "cos", "sin"))
        n["first"] = g.call_function(aten.slice.Tensor, (n["x"], any_(), any_(), any_(), any_()))
        n["second"] = g.call_function(aten.slice.Tensor, (n["x"], any_(), any_(), any_(), any_()))
        pair = [g.call_function(aten.neg.default, (n["second"],)), n["first"]]
        if interleaved:
            n["join"] = g.call_function(aten.stack.default, (pair, any_()))
            n["rotated"] = g.call_function(aten.view.default, (n["join"], any_()))
        else:
            n["join"] = n["rotated"] = g.call_function(aten.cat.default, (pair, any_()))
        by_cos = g.call_function(aten.mul.Tensor, _ordered(n["x"], n["cos"], swap_cos))
        by_sin = g.call_function(aten.mul.Tensor, _ordered(n["rotated"], n["sin"], swap_sin))
        return g.call_function(aten.add.Tensor, _ordered(by_cos, by_sin, swap_add))

    return _pattern(build)


def _rotary(graph: Graph, n: Named, interleaved: bool) -> Node | None:
    x, cos, sin, out = (_val(n[k]) for k in ("x", "cos", "sin", "out"))
    if not all(isinstance(t, torch.Tensor) for t in (x, cos, sin, out)) or x.dim() != 4:
        return None
    width = x.shape[-1]
    if not (isinstance(width, int) and width % 2 == 0 and _same_shape(out, x)):
        return None
    if not (x.dtype == cos.dtype == sin.dtype == out.dtype and x.dtype.is_floating_point):
        return None
    if not (_rotates(n, interleaved, width) and _repeated(n["cos"], interleaved) and _repeated(n["sin"], interleaved)):
        return None
    heads = _heads_axis(x.shape, cos.shape)
    if heads is None or str(tuple(cos.shape)) != str(tuple(sin.shape)):
        return None
    x_in = n["x"] if heads == 1 else _call(graph, aten.transpose.int, n["x"], 1, 2)
    rotated = _call(
        graph,
        torch.ops.trt_lower.rotary_embedding.default,
        x_in,
        _half(graph, n["cos"], heads, interleaved),
        _half(graph, n["sin"], heads, interleaved),
        interleaved,
    )
    return rotated if heads == 1 else _call(graph, aten.transpose.int, rotated, 1, 2)


def _rotates(n: Named, interleaved: bool, width: int) -> bool:
    """The slices and the join pair the elements as the rotation does: halves (0..w/2 with w/2..w)
    or neighbours (even with odd), both over the last axis."""
    rank, half = 4, width // 2
    (_, d1, s1, e1, st1), (_, d2, s2, e2, st2) = (_slice_args(n[k]) for k in ("first", "second"))
    joined_rank = rank + 1 if interleaved else rank  # stack adds an axis
    if not (_last(d1, rank) and _last(d2, rank) and _last(n["join"].args[1], joined_rank)):
        return False
    if interleaved:
        return (
            (s1, s2, st1, st2) == (0, 1, 2, 2)
            and all(isinstance(e, int) and e >= width for e in (e1, e2))
            and _same_shape(_val(n["rotated"]), _val(n["x"]))
        )
    return (s1, e1, s2, st1, st2) == (0, half, half, 1, 1) and isinstance(e2, int) and e2 >= width


def _slice_args(node: Node) -> tuple[Any, ...]:
    """slice.Tensor(self, dim=0, start=None, end=None, step=1)'s arguments, defaults filled in."""
    args = list(node.args) + [0, None, None, 1][len(node.args) - 1 :]
    start = 0 if args[2] is None else args[2]
    end = _END if args[3] is None else args[3]
    return args[0], args[1], start, end, args[4]


def _heads_axis(x: tuple[Any, ...], cache: tuple[Any, ...]) -> int | None:
    """Which axis of x holds the heads: the one the cache broadcasts over (size 1), the other
    being the sequence; None where the cache's shape is no per-position cache."""
    if len(cache) != 4 or str(cache[3]) != str(x[3]) or str(cache[0]) not in ("1", str(x[0])):
        return None
    for heads, seq in ((1, 2), (2, 1)):
        if str(cache[heads]) == "1" and str(cache[seq]) == str(x[seq]):
            return heads
    return None


def _half(graph: Graph, cache: Node, heads: int, interleaved: bool) -> Node:
    """The (batch, seq, head_dim / 2) cache RotaryEmbedding takes from a full one (a value per
    element, each twice)."""
    squeezed = _call(graph, aten.squeeze.dims, cache, [heads])
    width = _val(cache).shape[-1]
    return _call(graph, aten.slice.Tensor, squeezed, 2, 0, _END if interleaved else width // 2, 2 if interleaved else 1)


def _repeated(node: Node, interleaved: bool) -> bool:
    """Whether `node`'s last axis is known to hold each value twice, as a rotary cache for a whole
    head does: its two halves equal (cat([f, f])), or neighbours (repeat_interleave's expand)."""
    for source in _position_preserving(node):
        if interleaved and source.target in _VIEWS:
            return _pairs(source)
        if not interleaved and source.target is aten.cat.default:
            parts: Any = source.args[0]
            dim = source.args[1] if len(source.args) > 1 else 0
            return len(parts) == 2 and parts[0] is parts[1] and _last(dim, _val(source).dim())
    return False


def _position_preserving(node: Any) -> Iterator[Node]:
    """`node`, then its inputs back through ops that keep every element's place on the last axis."""
    while isinstance(node, Node) and node.op == "call_function":
        yield node
        target, args = node.target, node.args
        if (
            target in _ELEMENTWISE
            or (target in _BY_SCALAR and not isinstance(args[1], Node))
            or (target is aten.unsqueeze.default and not _last(args[1], _val(node).dim()))
        ):
            node = args[0]
        else:
            return


def _pairs(view: Node) -> bool:
    """view(expand(unsqueeze(a, -1), [..., 2])) merging the last two axes: a's values repeated
    in place (repeat_interleave(a, 2, -1))."""
    source = view.args[0]
    if isinstance(source, Node) and source.target is aten.clone.default:
        source = source.args[0]
    if not (isinstance(source, Node) and source.target is aten.expand.default):
        return False
    inner = source.args[0]
    expanded, merged = _val(source).shape, _val(view).shape
    if not (isinstance(inner, Node) and inner.target is aten.unsqueeze.default and _last(inner.args[1], len(expanded))):
        return False
    return str(expanded[-1]) == "2" and str(tuple(merged)) == str((*expanded[:-2], 2 * expanded[-2]))
