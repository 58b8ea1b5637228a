"""One engine as a stand-alone case for NVIDIA's tools (`trt-lower repro`, cli/repro.py).

The directory holds the engine's self-contained ONNX, the eager values of its inputs (Polygraphy's
`--load-inputs` format: a JSON list of feed dicts) and of its outputs (a Polygraphy RunResults with
one run, "eager", for `--load-outputs`), so that `polygraphy run` compares TensorRT and ONNX Runtime
on exactly that engine against eager PyTorch.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from polygraphy.comparator import IterationResult, RunResults
from polygraphy.json import save_json

from converters.core.segment import OnnxSegment
from trt_lower.debug.replay import Replay
from trt_lower.values.call import Inputs
from trt_lower.verify.nodes import Recorder

MODEL, INPUTS, OUTPUTS = "model.onnx", "inputs.json", "eager_outputs.json"


def _array(t: torch.Tensor, vi: onnx.ValueInfoProto) -> np.ndarray[Any, Any]:
    """As the ONNX declares it (float64 engines take float32)."""
    dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
    return t.detach().cpu().numpy().astype(dtype, copy=False)


def _precision_flag(precision: str, trt_version: str) -> str:
    """How polygraphy must build the fp16 ONNX: strongly typed (10.x, 11.x), or with the FP16
    builder flag on 8.6, which has no strong typing."""
    if precision != "fp16":
        return ""
    return " --fp16" if trt_version == "8.6" else " --strongly-typed"


def _save(
    out: Path,
    segment: OnnxSegment,
    feeds: dict[str, np.ndarray[Any, Any]],
    outputs: dict[str, np.ndarray[Any, Any]],
    runner: str,
    flag: str,
    rtol: float,
    atol: float,
) -> str:
    out.mkdir(parents=True, exist_ok=True)
    # Self-contained, or past 2 GB with its weights beside it (model.onnx.data), as Polygraphy and
    # trtexec read them.
    segment.write(out / MODEL)
    save_json([feeds], str(out / INPUTS), description="engine inputs")
    RunResults([(runner, [IterationResult(outputs, runner_name=runner)])]).save(str(out / OUTPUTS))
    return (
        f"polygraphy run {shlex.quote(str(out / MODEL))} --trt --onnxrt{flag} "
        f"--load-inputs {shlex.quote(str(out / INPUTS))} --load-outputs {shlex.quote(str(out / OUTPUTS))} "
        f"--rtol {rtol:g} --atol {atol:g}"
    )


def write_repro(
    model: torch.nn.Module,
    lowered: torch.nn.Module,
    inputs: Inputs,
    engine: str,
    out_dir: str | Path,
    *,
    kwargs: dict[str, Any] | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-3,
) -> str:
    """Write `engine`'s repro, with eager PyTorch's outputs, into `out_dir`; return the
    `polygraphy run` command that checks it. inputs, kwargs: the model's arguments, as
    lower_to_trt takes them."""
    replay = Replay(model, lowered, inputs, kwargs)
    nodes = replay.engine(engine)
    # The engine's ONNX as lowering made it (a TensorRT engine module keeps only its plan).
    segment, fed = replay.convert(nodes.nodes, nodes.outputs, engine, nodes.inputs)
    graph = segment.onnx.model.graph
    feeds = {vi.name: _array(replay.values[n], vi) for vi, n in zip(graph.input, fed)}
    eager = {vi.name: _array(replay.values[n], vi) for vi, n in zip(graph.output, nodes.outputs)}
    flag = _precision_flag(replay.settings.precision, replay.settings.trt_version)
    return _save(Path(out_dir), segment.onnx, feeds, eager, "eager", flag, rtol, atol)


def write_repro_loaded(
    loaded: torch.fx.GraphModule, engine: str, out_dir: str | Path, *, rtol: float = 1e-3, atol: float = 1e-3
) -> str:
    """The same from a loaded artifact, which carries no eager model: the engine runs on ONNX
    Runtime on random inputs of the recorded shapes, and its outputs are the reference."""
    module: Any = getattr(loaded, engine, None)
    segment = getattr(module, "segment", None)
    if not isinstance(segment, OnnxSegment):
        raise ValueError(
            f"{engine}: not an ONNX Runtime engine of the loaded model (load it with "
            f"backend='onnxruntime'); it has {[n for n, _ in loaded.named_children()]}"
        )
    guard: Any = getattr(loaded, "_input_guard", None)
    if guard is None:
        raise ValueError("the loaded model has no input guard to read its input shapes from")
    recorder = Recorder(loaded)
    with torch.no_grad():
        recorder.run(*(torch.randn(s.opt_shape).to(s.dtype) for s in guard.inputs))
    call = next(n for n in recorder.values if n.op == "call_module" and n.target == engine)
    args, result = [recorder.values[a] for a in call.all_input_nodes], recorder.values[call]
    graph = segment.model.graph
    results = result if isinstance(result, tuple) else (result,)
    feeds = {vi.name: _array(t, vi) for vi, t in zip(graph.input, args)}
    outputs = {vi.name: _array(t, vi) for vi, t in zip(graph.output, results)}
    report = getattr(loaded, "report")
    flag = _precision_flag(report.precision, report.trt_version)
    return _save(Path(out_dir), segment, feeds, outputs, "onnxruntime", flag, rtol, atol)
