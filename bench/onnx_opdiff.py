"""Op-type counts of trt_lower's engines vs the whole-graph export, after ONNX Runtime's optimizer.

    python bench/onnx_opdiff.py [--models resnet18,bert,...] [--raw] [--save DIR]

For each model of bench_models.py: the ONNX of every engine of the lowered module and the
`torch.onnx.export` of the whole model, each optimized by ONNX Runtime with trt_lower's session
options (ORT_ENABLE_ALL) and written back (`SessionOptions.optimized_model_filepath`); printed
are the op types whose counts differ (ours summed over engines). `--raw` compares the ONNX as
handed to ONNX Runtime, before its optimizer. Untimed: this explains bench_models.py's ratios.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile

import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_models import MODELS, export_whole  # noqa: E402

import trt_lower  # noqa: E402
from trt_lower.runtime.ort_module import OrtEngineModule  # noqa: E402


def optimized(onnx_bytes: bytes, path: str) -> onnx.ModelProto:
    """The model as ONNX Runtime's optimizer leaves it, with create_session's level."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.optimized_model_filepath = path
    ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    return onnx.load(path, load_external_data=False)


def op_counts(models: list[onnx.ModelProto]) -> collections.Counter[str]:
    return collections.Counter(n.op_type for m in models for n in m.graph.node)


def compare(name: str, raw: bool, save: str | None) -> None:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    ours = [m.onnx_bytes for m in lowered.modules() if isinstance(m, OrtEngineModule)]
    whole = export_whole(model, inputs)
    with tempfile.TemporaryDirectory() as tmp:

        def load(data: bytes, tag: str) -> onnx.ModelProto:
            if raw:
                return onnx.load_from_string(data)
            path = os.path.join(save or tmp, f"{name}_{tag}.onnx")
            return optimized(data, path)

        mine = op_counts([load(b, f"ours{i}") for i, b in enumerate(ours)])
        theirs = op_counts([load(whole, "whole")])
    print(f"== {name}: {len(ours)} engine(s); nodes ours {sum(mine.values())}, whole {sum(theirs.values())}")
    for op in sorted(set(mine) | set(theirs)):
        if mine[op] != theirs[op]:
            print(f"   {op:28s} ours {mine[op]:4d}  whole {theirs[op]:4d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--raw", action="store_true", help="compare before ONNX Runtime's optimizer")
    parser.add_argument("--save", default=None, help="keep the optimized models in this folder")
    args = parser.parse_args()
    if args.save:
        os.makedirs(args.save, exist_ok=True)
    for name in args.models.split(","):
        compare(name, args.raw, args.save)


if __name__ == "__main__":
    main()
