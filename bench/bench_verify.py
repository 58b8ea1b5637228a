"""Build-time verification (lower_to_trt(verify=True)): what it costs, and that it repairs nothing
that is right.

    python bench/bench_verify.py [--models resnet50,bert] [--reps 2] [--json out.json]
    python bench/bench_verify.py --zoo [--models vit_b_16,...] [--precisions fp32,fp16] [--json out.json]
    python bench/bench_verify.py --zoo --int8 [--models resnet50,...] [--precisions fp32] [--json out.json]
    python bench/bench_verify.py --fuzz 300 [--normal] [--wide] [--seed S] [--json out.json]

Default mode: ResNet-50 (1x3x224x224) and BERT-base (1x128 token ids), random weights, lowered on
ONNX Runtime with verify=False and verify=True, alternating (the order rotating per repetition),
after one warm-up lowering; prints the median lowering time of each, the added share, and the
"verify" line of report.timings.
--zoo: every architecture of bench/model_zoo.py lowered with verify=True in each precision;
prints per model the engines, the worst engine error found (the largest share of its allowed
bound an element reached, trt_lower/verify/tolerance.py: above 1 fails) and the repairs made
(each one on a correct lowering would be a false repair). With --int8, bench_quant.py's models
instead, each quantized as bench_quant.py does (trt_lower.quantization, calibrated on its random
batches) before it is lowered.
--fuzz N: N graphs of tests/test_fuzz.py's structural fuzzer (layers returning intermediates,
lowered six to a module as the test does; its derandomized CI profile's, or random ones drawn
from --seed), each lowered with
verify=True; a lowering with repairs is lowered again with verify=False, and each repair counts as
false when that one matches eager (the fuzzer's tolerance, 1e-4). Prints the lowerings, repairs
(false, true), crashes (lower_to_trt raising) and wrong results, and the mean coverage. The
fuzzer's inputs are multiples of 1/8, on which its sums and products are exact; --normal feeds the
same graphs standard normal inputs instead, so that they round (and cancellations leave noise);
--wide adds the random-program fuzzer's reductions (sum, mean, softmax, norm, ...) and
torch.nn.functional layers (layer_norm, normalize, gelu, ...) to the graphs' lines: sums over
normalised values, zero but for rounding.
See bench/README.md, "verify".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
import traceback
import warnings
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_quant  # noqa: E402
from model_zoo import MODELS as ZOO  # noqa: E402

import trt_lower  # noqa: E402
from trt_lower.quantization import quantize  # noqa: E402


def _resnet50() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import torchvision

    return torchvision.models.resnet50().eval(), (torch.randn(1, 3, 224, 224),)


def _bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    model: torch.nn.Module = transformers.BertModel(transformers.BertConfig())
    return model.eval(), (torch.randint(0, 30522, (1, 128)),)


OVERHEAD_MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]] = {
    "resnet50": _resnet50,
    "bert": _bert,
}


def overhead(name: str, reps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs = OVERHEAD_MODELS[name]()
    seconds: dict[bool, list[float]] = {False: [], True: []}
    verify_line: list[float] = []
    stages: dict[bool, list[dict[str, float]]] = {False: [], True: []}  # report.timings of each run
    for rep in range(reps):
        for verify in (False, True) if rep % 2 == 0 else (True, False):
            start = time.perf_counter()
            lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", verify=verify)
            seconds[verify].append(time.perf_counter() - start)
            stages[verify].append(lowered.report.timings)
            if verify:
                verify_line.append(lowered.report.timings["verify"])
                assert not lowered.report.repairs, lowered.report.repairs
            del lowered
    off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
    # Capture is the same work with and without verification, and on a shared machine its time
    # varies by more than verification costs: the difference of the stages after it, over the
    # whole lowering, says what verification adds with that noise left out.
    after = {v: statistics.median(t - s["capture"] for t, s in zip(seconds[v], stages[v])) for v in (False, True)}
    row: dict[str, Any] = {
        "verify_false_s": off,
        "verify_true_s": on,
        "added": on / off - 1,
        "added_after_capture": (after[True] - after[False]) / off,
        "verify_line_s": statistics.median(verify_line),
        "runs": seconds,
        "timings": stages,
        "load_average": os.getloadavg(),
    }
    print(
        f"{name:10s} verify=False {off:6.2f} s   verify=True {on:6.2f} s   added {row['added']:+6.1%}   "
        f"added after capture {row['added_after_capture']:+6.1%}   "
        f"'verify' line {row['verify_line_s']:.2f} s ({row['verify_line_s'] / off:.1%})   "
        f"load average {' '.join(f'{x:.1f}' for x in row['load_average'])}",
        flush=True,
    )
    return row


def _quantized(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """bench_quant.py's model `name`, quantized as bench_quant.py quantizes it."""
    model, inputs, batches = bench_quant.MODELS[name]()
    calibration = [batches(seed) for seed in range(1, bench_quant.CALIBRATION + 1)]
    return quantize(model, inputs, calibration), inputs


def zoo_one(name: str, precision: str, int8: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs = _quantized(name) if int8 else ZOO[name]()
    start = time.perf_counter()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", precision=precision)
    report = lowered.report
    return {
        "engines": len(report.engines),
        "worst": max(report.verify_errors.values(), default=0.0),
        "repairs": [str(r) for r in report.repairs],
        "lower_s": time.perf_counter() - start,
        "verify_s": report.timings["verify"],
    }


def fuzz(graphs: int, normal: bool, seed: int | None, wide: bool) -> dict[str, Any]:
    """The structural fuzzer's graphs lowered with verify=True: false repairs, crashes, coverage."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    import hypothesis
    import test_fuzz
    from hypothesis import given, settings
    from hypothesis import strategies as st

    if wide:
        test_fuzz.STRUCTURE_OPS += [test_fuzz.reduce, test_fuzz.nn]
    per = test_fuzz.GRAPHS_PER_MODEL
    totals = {"lowerings": 0, "graphs": 0, "repairs": 0, "false": 0, "true": 0, "crashes": 0, "wrong": 0}
    coverage: list[float] = []
    cases: list[dict[str, Any]] = []

    def matches(module: Callable[..., Any], inputs: tuple[torch.Tensor, ...], expected: Any) -> bool:
        try:
            torch.testing.assert_close(module(*inputs), expected, rtol=1e-4, atol=1e-4, equal_nan=True)
        except AssertionError:
            return False
        return True

    @settings(test_fuzz.PROFILE, max_examples=graphs // per, derandomize=seed is None, database=None)
    @given(st.lists(test_fuzz.structured_programs(), min_size=per, max_size=per).map(test_fuzz.together))
    def one(program: Any) -> None:
        inputs, fn = program.inputs(), test_fuzz.compile_program(program.code)
        if normal:
            generator = torch.Generator().manual_seed(program.seed)
            inputs = tuple(torch.randn(t.shape, generator=generator) for t in inputs)
        expected = fn(*inputs)
        totals["lowerings"] += 1
        totals["graphs"] += per
        lower = functools.partial(trt_lower.lower_to_trt, test_fuzz.Module(fn), inputs, backend="onnxruntime")
        try:
            lowered = lower(min_block_size=1)
        except Exception as e:  # a crash is the finding: the sweep goes on
            totals["crashes"] += 1
            cases.append({"crash": f"{type(e).__name__}: {e}"[:300], "program": program.describe()})
            return
        coverage.append(lowered.report.coverage)
        totals["wrong"] += not matches(lowered, inputs, expected)
        repairs = [str(r) for r in lowered.report.repairs]
        if repairs:
            right = matches(lower(min_block_size=1, verify=False), inputs, expected)
            totals["repairs"] += len(repairs)
            totals["false" if right else "true"] += len(repairs)
            cases.append({"repairs": repairs, "false": right, "program": program.describe()})
            print(f"  {'FALSE' if right else 'true'} repair(s): {'; '.join(repairs)}", flush=True)

    (one if seed is None else hypothesis.seed(seed)(one))()
    row: dict[str, Any] = {**totals, "coverage": statistics.mean(coverage) if coverage else None, "cases": cases}
    print(
        f"structural fuzzer: {totals['graphs']} graphs in {totals['lowerings']} lowerings; repairs "
        f"{totals['repairs']} (false {totals['false']}, true {totals['true']}); crashes {totals['crashes']}; "
        f"wrong {totals['wrong']}; mean coverage {row['coverage']}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", action="store_true")
    parser.add_argument("--int8", action="store_true", help="with --zoo: bench_quant.py's models, quantized")
    parser.add_argument("--fuzz", type=int, default=0, help="this many structural fuzzer graphs instead")
    parser.add_argument("--normal", action="store_true", help="with --fuzz: standard normal inputs")
    parser.add_argument("--wide", action="store_true", help="with --fuzz: reductions and layers too")
    parser.add_argument("--seed", type=int, default=None, help="with --fuzz: random graphs from this seed, not CI's")
    parser.add_argument("--models", default=None)
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results: dict[str, Any] = {}
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, backend onnxruntime")
    if args.fuzz:
        results["fuzz"] = fuzz(args.fuzz, args.normal, args.seed, args.wide)
    elif not args.zoo:
        warm, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
        trt_lower.lower_to_trt(warm, (x,), backend="onnxruntime")  # torch.export's first-call costs
        for name in (args.models or ",".join(OVERHEAD_MODELS)).split(","):
            results[name] = overhead(name, args.reps)
    else:
        totals = {"lowerings": 0, "repairs": 0, "failed": 0}
        print(
            f"{'model':34s} {'precision':9s} {'engines':>7s} {'worst err':>9s} {'verify s':>8s} {'lower s':>7s}  repairs"
        )
        for name in (args.models or ",".join(bench_quant.MODELS if args.int8 else ZOO)).split(","):
            for precision in args.precisions.split(","):
                try:
                    row = zoo_one(name, precision, args.int8)
                except Exception as e:  # the sweep goes on: the failure is the result
                    row = {
                        "failed": f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}",
                        "traceback": traceback.format_exc(),
                    }
                    totals["failed"] += 1
                    print(f"{name:34s} {precision:9s} FAILED {row['failed']}", flush=True)
                else:
                    totals["lowerings"] += 1
                    totals["repairs"] += len(row["repairs"])
                    print(
                        f"{name:34s} {precision:9s} {row['engines']:7d} {row['worst']:9.2e} {row['verify_s']:8.2f} "
                        f"{row['lower_s']:7.1f}  {'; '.join(row['repairs']) or '-'}",
                        flush=True,
                    )
                results[f"{name}/{precision}"] = row
        print(
            f"lowerings {totals['lowerings']}, repairs {totals['repairs']} (each a false repair), "
            f"failed {totals['failed']}"
        )
        results["totals"] = totals
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
