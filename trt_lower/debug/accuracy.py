"""check_accuracy: the lowered module against eager PyTorch, output by output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from trt_lower.debug.compare import OutputError, compare
from trt_lower.debug.divergence import Divergence, first_divergence
from trt_lower.values.call import Inputs, model_call


@dataclass(frozen=True)
class AccuracyResult:
    """Each output's max abs/rel error against eager and whether it is within tolerance; true when
    every output is. `divergence`: the first diverging node, with check_accuracy(details=True)."""

    outputs: list[OutputError]
    rtol: float
    atol: float
    # check_accuracy(..., details=True) on failure: where the engines first depart from eager.
    divergence: Divergence | None = None

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        lines = [f"accuracy vs eager (rtol={self.rtol:g}, atol={self.atol:g}): {'PASS' if self.passed else 'FAIL'}"]
        for o in self.outputs:
            lines.append(f"  {o}{'' if o.passed or o.mismatch else '  <-- out of tolerance'}")
        if self.divergence is not None:
            lines.append(str(self.divergence))
        return "\n".join(lines)


def check_accuracy(
    model: torch.nn.Module,
    lowered: torch.nn.Module,
    inputs: Inputs,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    details: bool = False,
    *,
    kwargs: dict[str, Any] | None = None,
) -> AccuracyResult:
    """Run both as `f(*inputs, **kwargs)` (as lower_to_trt takes them: one tensor stands for
    `(x,)`) and compare every output tensor (max abs/rel error, pass flag; a dtype or shape
    mismatch is named as such). details=True: on failure, also locate the first diverging node
    (trt_lower.debug.first_divergence)."""
    args, kwargs = model_call(inputs, kwargs)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            expected = model(*args, **kwargs)
            actual = lowered(*args, **kwargs)
    finally:
        model.train(was_training)
    exp_leaves = pytree.tree_flatten_with_path(expected)[0]
    act_leaves, act_spec = pytree.tree_flatten(actual)
    if len(exp_leaves) != len(act_leaves):
        raise ValueError(f"the lowered module returns {len(act_leaves)} values, the model {len(exp_leaves)}")
    outputs = []
    for (path, e), a in zip(exp_leaves, act_leaves):
        if isinstance(e, torch.Tensor):
            outputs.append(compare(pytree.keystr(path), e, a, rtol, atol))
    result = AccuracyResult(outputs, rtol, atol)
    # A dtype or shape mismatch is its own explanation: no node's values diverge for it.
    if details and any(not o.passed and not o.mismatch for o in outputs):
        result = AccuracyResult(
            outputs, rtol, atol, first_divergence(model, lowered, args, kwargs=kwargs, rtol=rtol, atol=atol)
        )
    return result
