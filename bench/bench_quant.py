"""INT8, FP8 and INT4 weight-only with trt_lower.quantization: error, engines, artifact size and
ONNX Runtime latency against fp32.

    python bench/bench_quant.py [--models resnet50,bert_base,llama_small] [--dtypes int8,fp8]
                                [--int4 llama_int4,qwen2_0_5b] [--calls 10] [--json out.json]

For each model (random weights, from torchvision's / transformers' configs) and format: quantize it
with `trt_lower.quantization.quantize(..., dtype=...)` (calibrated on `CALIBRATION` random
batches), lower the fp32 model and the quantized one with backend="onnxruntime" (FP8: target
"latest", the one with FP8), and on one fixed batch report
- the error of the lowered quantized model against the fp32 model (max and mean abs, and top-1
  agreement: ResNet-50's class per image, the language models' token per position) and against
  the eager quantized module (what TensorRT should compute; int8: beside its coarsest activation step),
- int8 only, the noise floor of that last figure: how far the eager quantized module moves from itself when
  evaluated in another, equally valid way: its quantize nodes rounding x / s (QuantizeLinear's
  formula) instead of torch's x * (1 / s), or everything between its quantize/dequantize nodes
  in float64. A code flipped at a rounding boundary spreads through the later layers, so in a
  deep model both land as far from eager as the engine does (trt_lower.debug.quantized),
- per layer (trt_lower.debug.quantized_layers: each quantize node's layer converted alone and fed
  eager inputs): the int8 codes (FP8: values, in FP8's order) other than eager's, of all, and the
  largest difference: what the lowering itself adds, which is at most one step of the format, at
  values on a rounding boundary,
- engines and coverage of the quantized lowering,
- the artifact (trt_lower.save) of each, in bytes, and their ratio,
- latency per call of the two lowered models on ONNX Runtime, interleaved, median of `--calls`.

ONNX Runtime runs the Q/DQ nodes as float arithmetic on x86 (trt_lower turns its QDQ fusions off:
they would quantize more than the Q/DQ say), so the quantized model here is the fp32 work plus the
Q/DQ: the latency ratio says nothing of TensorRT's int8 or FP8 speed, which needs a GPU (FP8: Ada,
Hopper or newer) and is not measured here.

INT4 weight-only (`--int4`: a small Llama, and Qwen2-0.5B's sizes): each linear weight quantized to
INT4 in groups of 128 input channels (`quantize(..., dtype="int4_weight_only")`), both lowered for
trt_version="latest" (opset-21 INT4 DequantizeLinear). Reported: the artifact of each and their
ratio, per layer (each INT4 weight dequantized by its engine alone) the INT4 codes other than
eager's, the error and the greedy (argmax) token per position against fp32 and against the eager
quantized model, and ONNX Runtime latency. ONNX Runtime dequantizes the weights to float32 at each
call and multiplies in float32: its latency says nothing about TensorRT's INT4 weight-only GEMMs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower.benchmarking import models as demo_models  # noqa: E402
from trt_lower.debug import quantized_layers  # noqa: E402
from trt_lower.quantization import quantize  # noqa: E402

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...], Callable[[int], tuple[torch.Tensor, ...]]]
CALIBRATION = 4


def resnet50() -> Example:
    model, inputs = demo_models.build("resnet50", 4)
    return model, inputs, lambda seed: (torch.randn(4, 3, 224, 224, generator=torch.Generator().manual_seed(seed)),)


def _ids(vocab: int, shape: tuple[int, int]) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda seed: (torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed)),)


class Logits(torch.nn.Module):
    """A transformers model's logits alone (the quantizer captures a tensor-returning module)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model(ids).logits
        return logits


def bert_base() -> Example:
    """bert-base-uncased's architecture (hidden 768, 12 layers) with its masked-LM head."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig()
    batches = _ids(config.vocab_size, (1, 128))
    return Logits(BertForMaskedLM(config)).eval(), batches(0), batches


def _llama(intermediate_size: int) -> Example:
    """A small Llama (hidden 512, 4 layers, grouped-query attention) with its LM head."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=512,
        intermediate_size=intermediate_size,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
    )
    batches = _ids(config.vocab_size, (1, 64))
    return Logits(LlamaForCausalLM(config)).eval(), batches(0), batches


def llama_small() -> Example:
    return _llama(1376)


MODELS: dict[str, Callable[[], Example]] = {"resnet50": resnet50, "bert_base": bert_base, "llama_small": llama_small}


qd = torch.ops.quantized_decomposed
QUANTIZE, DEQUANTIZE = (
    qd.quantize_per_tensor.default,
    (qd.dequantize_per_tensor.default, qd.dequantize_per_channel.default),
)


class RoundXOverS(torch.fx.Interpreter):
    """The quantized module with its quantize nodes rounding x / s, as QuantizeLinear does."""

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target is QUANTIZE:
            x, scale, zero_point, low, high, dtype = args
            return torch.clamp(torch.round(x / scale) + zero_point, low, high).to(dtype)
        return super().call_function(target, args, kwargs)


class Float64(torch.fx.Interpreter):
    """The quantized module computing in float64 between its quantize and dequantize nodes (the
    same scales; torch's x * (1 / s) rounding, in float64)."""

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        def wide(a: Any) -> Any:
            if a is torch.float32:
                return torch.float64
            return a.double() if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a

        args, kwargs = torch.fx.node.map_aggregate((args, kwargs), wide)
        if target is torch.ops.higher_order.wrap_with_set_grad_enabled:  # a subgraph (Llama's rotary embedding)
            enabled, subgraph, *inputs = args
            with torch.set_grad_enabled(enabled):
                return Float64(subgraph).run(*inputs)
        if target is QUANTIZE:  # torch's quantize takes float32 only
            x, scale, zero_point, low, high, dtype = args
            return torch.clamp(torch.round(x * (1.0 / scale)) + zero_point, low, high).to(dtype)
        if target in DEQUANTIZE:  # widen their result
            x, scale, zero_point = args[:3]
            if target is qd.dequantize_per_channel.default:
                shape = [-1 if d == args[3] else 1 for d in range(x.dim())]
                scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
            return (x.double() - zero_point) * scale
        return super().call_function(target, args, kwargs)


def _drift(
    quantized: torch.fx.GraphModule,
    interpreter: type[torch.fx.Interpreter],
    inputs: tuple[torch.Tensor, ...],
    eager: torch.Tensor,
) -> float:
    with torch.no_grad():
        return float((interpreter(quantized).run(*inputs).float() - eager).abs().max())


def _size(lowered: trt_lower.LoweredModule, directory: str, name: str) -> int:
    path = Path(directory) / f"{name}.trt"
    trt_lower.save(lowered, path)
    return path.stat().st_size


def _latency(modules: dict[str, torch.nn.Module], inputs: tuple[torch.Tensor, ...], calls: int) -> dict[str, float]:
    """Median seconds per call of each, the calls interleaved (one of each in turn)."""
    times: dict[str, list[float]] = {name: [] for name in modules}
    with torch.no_grad():
        for m in modules.values():  # warm-up
            m(*inputs)
        for _ in range(calls):
            for name, m in modules.items():
                start = time.perf_counter()
                m(*inputs)
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _lower_both(
    model: torch.nn.Module,
    quantized: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    calls: int,
    kind: str,
    **options: Any,
) -> tuple[trt_lower.LoweredModule, tuple[torch.Tensor, ...], list[Any], dict[str, int], dict[str, float]]:
    """The fp32 model and the quantized one lowered alike: the quantized lowering; the outputs of
    the fp32 model, the eager quantized one and the lowered one; its quantized_layers; the two
    artifacts' sizes and latencies (keys "fp32" and `kind`)."""
    fp32 = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", **options)
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", **options)
    with torch.no_grad():
        outputs = model(*inputs), quantized(*inputs), lowered(*inputs)
    layers = quantized_layers(quantized, lowered, inputs)
    with tempfile.TemporaryDirectory() as directory:
        sizes = {"fp32": _size(fp32, directory, "fp32"), kind: _size(lowered, directory, kind)}
    return lowered, outputs, layers, sizes, _latency({"fp32": fp32, kind: lowered}, inputs, calls)


def _shared_figures(kind: str, layers: list[Any], sizes: dict[str, int], latency: dict[str, float]) -> dict[str, Any]:
    """The figures every row has: codes per layer, artifact sizes and latencies against fp32."""
    return {
        "layer_codes_flipped": sum(r.flipped for r in layers),
        "layer_codes": sum(r.total for r in layers),
        "layer_max_code_diff": max(r.max_diff for r in layers),
        "artifact_bytes": sizes,
        f"artifact_{kind}_vs_fp32": sizes[kind] / sizes["fp32"],
        "ort_latency_s": latency,
        f"ort_latency_{kind}_vs_fp32": latency[kind] / latency["fp32"],
    }


# The TensorRT target each format is lowered for (None: the installed one's, else the default):
# FP8 exists on "latest" only.
TARGETS: dict[str, str | None] = {"int8": None, "fp8": "latest"}


def measure(name: str, calls: int, dtype: str = "int8") -> dict[str, Any]:
    """One model in one format; the keys name the format (`int8_engines`, `fp8_engines`, ...)."""
    torch.manual_seed(0)
    model, inputs, batches = MODELS[name]()
    start = time.perf_counter()
    quantized = quantize(model, inputs, [batches(seed) for seed in range(1, CALIBRATION + 1)], dtype=dtype)
    quantize_s = time.perf_counter() - start
    assert isinstance(quantized, torch.fx.GraphModule)  # int8 and FP8: the converted, captured graph
    lowered, (reference, eager_q, lowered_q), layers, sizes, latency = _lower_both(
        model, quantized, inputs, calls, dtype, trt_version=TARGETS[dtype]
    )
    error = (lowered_q - reference).abs()
    top1 = (lowered_q.argmax(-1) == reference.argmax(-1)).float().mean().item()
    row = {
        "model": name,
        "dtype": dtype,
        f"{dtype}_engines": len(lowered.report.engines),
        f"{dtype}_coverage": lowered.report.coverage,
        f"{dtype}_layers": sum(sum(getattr(e, f"{dtype}_ops").values()) for e in lowered.report.engines),
        "max_abs_vs_fp32": error.max().item(),
        "mean_abs_vs_fp32": error.mean().item(),
        "fp32_output_abs_mean": reference.abs().mean().item(),
        "top1_agreement_vs_fp32": top1,
        f"max_abs_vs_eager_{dtype}": (lowered_q - eager_q).abs().max().item(),
        "quantize_nodes": len(layers),
        **_shared_figures(dtype, layers, sizes, latency),
        "quantize_s": quantize_s,
    }
    if dtype == "int8":  # FP8's quantize already divides by s as QuantizeLinear does
        row["coarsest_step"] = max(float(n.args[1]) for n in quantized.graph.nodes if n.target == QUANTIZE)
        row["eager_drift_round_x_over_s"] = _drift(quantized, RoundXOverS, inputs, eager_q)
        row["eager_drift_float64"] = _drift(quantized, Float64, inputs, eager_q)
    return row


def _summary(row: dict[str, Any]) -> str:
    d = row["dtype"]
    int8_only = (
        f" (coarsest step {row['coarsest_step']:.3g}; eager vs eager: x/s rounding "
        f"{row['eager_drift_round_x_over_s']:.3g}, float64 {row['eager_drift_float64']:.3g})"
        if d == "int8"
        else ""
    )
    return (
        f"{row['model']} {d}: engines {row[f'{d}_engines']} (coverage {row[f'{d}_coverage']:.0%}, "
        f"{row[f'{d}_layers']} {d} layers); vs fp32 max abs {row['max_abs_vs_fp32']:.4g}, mean abs "
        f"{row['mean_abs_vs_fp32']:.4g} (fp32 |out| mean {row['fp32_output_abs_mean']:.4g}), top-1 agreement "
        f"{row['top1_agreement_vs_fp32']:.1%}; vs eager {d} max abs {row[f'max_abs_vs_eager_{d}']:.3g}{int8_only}; "
        f"per layer fed eager inputs: {row['layer_codes_flipped']}/{row['layer_codes']} {d} codes flipped over "
        f"{row['quantize_nodes']} quantize nodes, max |code diff| {row['layer_max_code_diff']}; artifact "
        f"{row['artifact_bytes'][d] / 1e6:.1f} MB vs {row['artifact_bytes']['fp32'] / 1e6:.1f} MB "
        f"({row[f'artifact_{d}_vs_fp32']:.2f}); ORT latency {row['ort_latency_s'][d] * 1e3:.1f} ms vs "
        f"{row['ort_latency_s']['fp32'] * 1e3:.1f} ms ({row[f'ort_latency_{d}_vs_fp32']:.2f}x; CPU latency "
        "says nothing of TensorRT's speed)"
    )


def llama_int4() -> Example:
    """llama_small with linear layers whose input channels 128 divides (1376 it does not)."""
    return _llama(1536)


def qwen2_0_5b() -> Example:
    """Qwen2-0.5B's sizes (bench/bench_generate.py's qwen2-0.5b), 494 M parameters."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        max_position_embeddings=32768,
    )
    batches = _ids(config.vocab_size, (1, 64))
    return Logits(Qwen2ForCausalLM(config)).eval(), batches(0), batches


INT4_MODELS: dict[str, Callable[[], Example]] = {"llama_int4": llama_int4, "qwen2_0_5b": qwen2_0_5b}


def measure_int4(name: str, calls: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs, _ = INT4_MODELS[name]()
    start = time.perf_counter()
    quantized = quantize(model, dtype="int4_weight_only", group_size=128)
    quantize_s = time.perf_counter() - start
    int4, (reference, eager_int4, lowered_int4), layers, sizes, latency = _lower_both(
        model, quantized, inputs, calls, "int4", trt_version="latest"
    )
    tokens = lowered_int4.argmax(-1)
    return {
        "model": name,
        "int4_engines": len(int4.report.engines),
        "int4_coverage": int4.report.coverage,
        "int4_layers": sum(sum(e.int4_ops.values()) for e in int4.report.engines),
        "max_abs_vs_fp32": (lowered_int4 - reference).abs().max().item(),
        "fp32_output_abs_mean": reference.abs().mean().item(),
        "greedy_token_agreement_vs_fp32": (tokens == reference.argmax(-1)).float().mean().item(),
        "max_abs_vs_eager_int4": (lowered_int4 - eager_int4).abs().max().item(),
        "greedy_token_agreement_vs_eager_int4": (tokens == eager_int4.argmax(-1)).float().mean().item(),
        "int4_weights": len(layers),
        **_shared_figures("int4", layers, sizes, latency),
        "quantize_s": quantize_s,
    }


def _print_int4(row: dict[str, Any]) -> None:
    print(
        f"{row['model']} (INT4 weight-only, groups of 128): engines {row['int4_engines']} (coverage "
        f"{row['int4_coverage']:.0%}, {row['int4_layers']} layers on INT4 weights); per weight alone: "
        f"{row['layer_codes_flipped']}/{row['layer_codes']} INT4 codes other than eager's over {row['int4_weights']} "
        f"weights, max |code diff| {row['layer_max_code_diff']}; vs fp32 max abs {row['max_abs_vs_fp32']:.4g} "
        f"(fp32 |out| mean {row['fp32_output_abs_mean']:.4g}), greedy tokens agree "
        f"{row['greedy_token_agreement_vs_fp32']:.1%}; vs eager INT4 max abs {row['max_abs_vs_eager_int4']:.3g}, "
        f"greedy tokens agree {row['greedy_token_agreement_vs_eager_int4']:.1%}; artifact "
        f"{row['artifact_bytes']['int4'] / 1e6:.1f} MB vs {row['artifact_bytes']['fp32'] / 1e6:.1f} MB "
        f"({row['artifact_int4_vs_fp32']:.2f}); ORT latency {row['ort_latency_s']['int4'] * 1e3:.1f} ms vs "
        f"{row['ort_latency_s']['fp32'] * 1e3:.1f} ms ({row['ort_latency_int4_vs_fp32']:.2f}x; CPU latency says "
        "nothing of TensorRT's)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument(
        "--int4", default="llama_int4", help=f"INT4 weight-only models, of {', '.join(INT4_MODELS)}; '' for none"
    )
    parser.add_argument("--dtypes", default="int8,fp8", help="formats to quantize to (quantize's dtype)")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for name in filter(None, args.int4.split(",")):
        rows.append(measure_int4(name, args.calls))
        _print_int4(rows[-1])
    for name in filter(None, args.models.split(",")):
        for dtype in args.dtypes.split(","):
            row = measure(name, args.calls, dtype)
            rows.append(row)
            print(_summary(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
