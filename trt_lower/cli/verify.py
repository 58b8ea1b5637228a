"""`trt-lower verify FILE [--backend ...]`: the upgrade gate for a saved model. Loads it (building
engines again where the file has no plan for this TensorRT and GPU), runs it on the probe saved
with it, prints each output's error against eager PyTorch's and the latency against the figure
recorded at save; exits 1 naming the outputs that disagree (2 when the file has no probe)."""

from __future__ import annotations

import argparse

from trt_lower.cli.arguments import add_backend, add_loading, input_file, loading


def verify(args: argparse.Namespace) -> int:
    import trt_lower
    from trt_lower.deploy import probe as artifact_probe

    lowered = trt_lower.load(args.file, backend=args.backend, cache_dir=args.cache_dir, **loading(args))
    lowered = getattr(lowered, "lowered_module", lowered)
    probe = lowered.probe
    if probe is None:
        print(
            f"{args.file} holds no probe (lowered with verify=False or from TensorSpecs without verify_inputs, "
            "or saved by an older trt_lower): nothing to verify against"
        )
        return 2
    result = artifact_probe.check(lowered, probe, timed=True)
    print(
        f"{args.file} on {lowered.report.backend}: {len(probe.inputs)} probe input(s), tolerance "
        f"{result.tolerance.describe()}"
    )
    for c in result.outputs:
        print(f"  {c.name:<12} error {c.error:9.3g} of tolerance  {'ok' if c.passed else 'FAIL'}")
    assert result.latency_s is not None
    recorded = f"{probe.latency_s * 1e3:.3f} ms at save" if probe.latency_s is not None else "none recorded at save"
    change = f" ({result.latency_s / probe.latency_s:.2f}x)" if probe.latency_s else ""
    print(f"  latency      {result.latency_s * 1e3:.3f} ms here, {recorded}{change}")
    if result.failed:
        print(f"FAIL: {', '.join(c.name for c in result.failed)} disagree(s) with eager PyTorch")
        return 1
    print("OK")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    add_backend(p)
    p.add_argument("--cache-dir", default=None, help="TensorRT engine cache for engines built again")
    add_loading(p)
    p.set_defaults(command_fn=verify)
