"""LoweredModule: what lower_to_trt returns (trt_lower/stitch.py makes it)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from trt_lower.draw import describe
from trt_lower.report import LoweringReport

if TYPE_CHECKING:
    from trt_lower.convert import ConvertedSegment


class LoweredModule(torch.fx.GraphModule):
    """The lowered model: a GraphModule whose `engine_<k>` submodules run engines and whose
    remaining nodes run in eager PyTorch. `report` says which is which."""

    report: LoweringReport
    # What each engine was made from, by engine name: trt_lower.save stores them.
    segments: dict[str, ConvertedSegment]

    def __init__(self, root: torch.nn.Module, graph: torch.fx.Graph, report: LoweringReport) -> None:
        super().__init__(root, graph, class_name="LoweredModule")
        self.report = report
        report.graph = describe(self.graph)
        # torch.export's pytree codegen reads the input/output specs from the module.
        for attr in ("_in_spec", "_out_spec"):
            if hasattr(root, attr):
                setattr(self, attr, getattr(root, attr))
