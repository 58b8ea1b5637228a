"""What a signature costs: signing a saved artifact, checking it, and trt_lower.load with and
without trusted keys (CPU, ONNX Runtime).

    python bench/bench_signing.py [--model resnet50] [--reps 3] [--json out.json]

The model is lowered and saved once, signed. Then `--reps` adjacent pairs of loads, without and
with `trusted_keys`, in alternating order after one untimed warm-up of each; the extra time is
taken per pair. The signature check alone (`signing.untrusted`: hash the file, verify) and
`signing.sign_file` (copy and sign) are timed too, with the file's size.
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

import trt_lower  # noqa: E402
from trt_lower.benchmarking import models as demo_models  # noqa: E402
from trt_lower.deploy import signing  # noqa: E402
from trt_lower.deploy.container import open_file  # noqa: E402


def _seconds(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(model_name: str, reps: int, root: Path) -> dict[str, Any]:
    model, inputs = demo_models.build(model_name, 1)
    key = Ed25519PrivateKey.generate()
    trusted = [key.public_key()]
    path = root / f"{model_name}.trtl"
    trt_lower.save(trt_lower.lower_to_trt(model, inputs, backend="onnxruntime"), path, sign_with=key)

    def plain() -> object:
        return trt_lower.load(path, backend="onnxruntime")

    def checked() -> object:
        return trt_lower.load(path, backend="onnxruntime", trusted_keys=trusted)

    plain(), checked()  # warm-up
    pairs = []
    for rep in range(reps):
        order = [plain, checked] if rep % 2 == 0 else [checked, plain]
        times = {f.__name__: _seconds(f) for f in order}
        pairs.append(times)

    def check() -> object:
        with open_file(path) as file:
            return signing.untrusted(file, path, trusted)

    check_s = statistics.median(_seconds(check) for _ in range(reps))
    sign = statistics.median(_seconds(lambda: signing.sign_file(path, root / "copy.trtl", key)) for _ in range(reps))
    size = path.stat().st_size
    plain_s = statistics.median(p["plain"] for p in pairs)
    checked_s = statistics.median(p["checked"] for p in pairs)
    return {
        "model": model_name,
        "file_bytes": size,
        "pairs": pairs,
        "load_s_median": plain_s,
        "load_trusted_keys_s_median": checked_s,
        "extra_vs_load": checked_s / plain_s - 1,
        "check_s_median": check_s,
        "check_bytes_per_s": size / check_s,
        "sign_file_s_median": sign,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=sorted(demo_models.MODELS))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.model, args.reps, Path(tmp))
    print(
        f"{result['model']}: file {result['file_bytes'] / 2**20:.1f} MiB; load {result['load_s_median']:.2f} s, "
        f"with trusted_keys {result['load_trusted_keys_s_median']:.2f} s ({result['extra_vs_load']:+.1%}); "
        f"signature check alone {result['check_s_median']:.3f} s ({result['check_bytes_per_s'] / 2**30:.2f} GiB/s); "
        f"trt-lower sign (copy + sign) {result['sign_file_s_median']:.3f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
