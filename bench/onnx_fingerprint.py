"""Hash the ONNX of every engine segment lowering emits, to prove a refactor emits the same ONNX.

Lowers each case of tests/test_converters.py (the TensorRT targets in turn) plus resnet18 and a small
BERT (tests/trt_models.py; fp32 and fp16) on ONNX Runtime and writes one line per lowering:
`<case> <sha256 of each engine's self-contained ONNX bytes>`. Run it before and after a change and
diff the two files:

    PYTHONPATH=$PWD:$PWD/tests python bench/onnx_fingerprint.py before.txt [LABEL-SUBSTRING...]

(with substrings, only the lowerings whose label contains one of them).
"""

from __future__ import annotations

import hashlib
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

import torch

torch.manual_seed(0)  # before the cases are built: some hold modules with random weights

from harness import Fn  # noqa: E402
from test_converters import CASES  # noqa: E402
from trt_models import MODELS  # noqa: E402

import trt_lower  # noqa: E402

if TYPE_CHECKING:
    from trt_lower.runtime.ort_module import OrtEngineModule

VERSIONS = ("8.6", "10.4", "10.12", "latest")


def fingerprint(model: torch.nn.Module, inputs: Sequence[torch.Tensor], **kwargs: Any) -> str:
    try:
        lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", **kwargs)
    except Exception as e:  # a refusal is part of the behaviour too
        return f"error:{type(e).__name__}"
    # backend="onnxruntime": every engine is an OrtEngineModule.
    return (
        " ".join(
            f"{name}:{hashlib.sha256(cast('OrtEngineModule', engine).onnx_bytes).hexdigest()[:16]}"
            for name, engine in lowered.named_children()
            if name.startswith("engine_")
        )
        or "no-engine"
    )


def main(path: str, only: list[str]) -> None:
    lines = []
    runs: list[tuple[str, Callable[[], tuple[torch.nn.Module, Sequence[torch.Tensor]]], dict[str, Any]]] = []
    for i, case in enumerate(CASES):

        def make_case(case: Any = case) -> tuple[torch.nn.Module, Sequence[torch.Tensor]]:
            return Fn(case.fn), case.make_inputs()

        version = VERSIONS[i % len(VERSIONS)]  # each target on a third of the cases, to keep it short
        runs.append((f"{i}:{case.op}-{case.id}@{version}", make_case, {"min_block_size": 1, "trt_version": version}))
    for name, build in MODELS.items():
        for version in VERSIONS:
            for precision in ("fp32", "fp16"):
                runs.append((f"{name}@{version}/{precision}", build, {"trt_version": version, "precision": precision}))
    for label, make, kwargs in runs:
        if only and not any(o in label for o in only):
            continue
        torch.manual_seed(0)
        model, inputs = make()
        lines.append(f"{label} {fingerprint(model, inputs, **kwargs)}")
        print(lines[-1], flush=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
