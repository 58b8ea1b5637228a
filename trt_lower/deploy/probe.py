"""The probe an artifact carries: the example inputs the model was verified with and eager
PyTorch's outputs for them (member probe.safetensors, at most CAP_BYTES; a larger probe is left
out and the manifest says so), with the lowered module's latency on them when saved. Where a
load builds an engine again (no plan in the file for this TensorRT and GPU), the loaded module is
run on the probe and compared with the eager outputs; `trt-lower verify` does so on demand."""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import safetensors.torch
import torch
import torch.utils._pytree as pytree

from converters.core.errors import TrtLowerError
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values.probe import Probe
from trt_lower.verify.tolerance import OutputCheck, Tolerance, check_output

log = logging.getLogger("trt_lower")

MEMBER = "probe.safetensors"
CAP_BYTES = 16 << 20
# Calls timed at save (after one warm-up call): the figure a later `trt-lower verify` compares with.
LATENCY_CALLS = 5


class ProbeError(TrtLowerError, ValueError):
    """A manifest's probe entry or member that does not parse."""


def call(lowered: LoweredModule, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The module called on flattened inputs; its outputs flattened, tensors only."""
    spec = getattr(lowered, "_in_spec", None)
    args, kwargs = pytree.tree_unflatten(list(inputs), spec) if spec is not None else (inputs, {})
    with torch.no_grad():
        out = lowered(*args, **kwargs)
    return tuple(t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor))


def latency(lowered: LoweredModule, inputs: tuple[torch.Tensor, ...], calls: int = LATENCY_CALLS) -> float:
    """The median seconds of a call, after one warm-up call."""
    call(lowered, inputs)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call(lowered, inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def write(lowered: LoweredModule, add: Callable[[str, bytes], None]) -> dict[str, Any]:
    """The manifest's "probe" entry, the member written through `add` where there is a probe."""
    probe = lowered.probe
    if probe is None:
        return {
            "omitted": "no probe: the module was lowered with verify=False, or from TensorSpecs without verify_inputs"
        }
    if probe.nbytes > CAP_BYTES:
        return {"omitted": f"the probe's {probe.nbytes} bytes are over the {CAP_BYTES}-byte cap"}
    seconds = probe.latency_s if probe.latency_s is not None else latency(lowered, probe.inputs)
    tensors = {
        **{f"input.{i}": t for i, t in enumerate(probe.inputs)},
        **{f"output.{i}": t for i, t in enumerate(probe.outputs)},
    }
    add(MEMBER, safetensors.torch.save({k: t.detach().cpu().contiguous().clone() for k, t in tensors.items()}))
    return {
        "member": MEMBER,
        "inputs": len(probe.inputs),
        "outputs": len(probe.outputs),
        "bytes": probe.nbytes,
        "cap_bytes": CAP_BYTES,
        "latency_s": seconds,
    }


def read(entry: Any, member: Callable[[str], bytes], where: torch.device) -> Probe | None:
    """The probe a manifest entry describes (None when it says it was left out); ProbeError
    naming the field that is wrong."""
    if not isinstance(entry, dict):
        raise ProbeError(f"field 'probe' must be an object, got {type(entry).__name__}")
    if "omitted" in entry:
        return None
    inputs, outputs = entry.get("inputs"), entry.get("outputs")
    if entry.get("member") != MEMBER or not (
        isinstance(inputs, int) and isinstance(outputs, int) and inputs >= 0 and outputs >= 0
    ):
        raise ProbeError(f"field 'probe' must name member {MEMBER!r} and count its inputs and outputs, got {entry}")
    seconds = entry.get("latency_s")
    if not (seconds is None or isinstance(seconds, (int, float))):
        raise ProbeError(f"field 'probe.latency_s' must be a number, got {seconds!r}")
    data = member(MEMBER)
    if len(data) > CAP_BYTES + (1 << 20):  # the tensors plus safetensors' header
        raise ProbeError(f"member {MEMBER} is {len(data)} bytes, over the probe's cap")
    try:
        tensors = safetensors.torch.load(data)
    except Exception as e:  # safetensors raises its own error types on a foreign payload
        raise ProbeError(f"member {MEMBER} is not a safetensors file ({e})") from None
    # The counts are the file's: compared with the member's tensors before they size anything.
    if inputs + outputs != len(tensors):
        raise ProbeError(
            f"member {MEMBER} holds {len(tensors)} tensors, not the {inputs} inputs and {outputs} outputs "
            "field 'probe' counts"
        )
    names = [f"input.{i}" for i in range(inputs)] + [f"output.{i}" for i in range(outputs)]
    if sorted(tensors) != sorted(names):
        raise ProbeError(
            f"member {MEMBER} holds {sorted(tensors)}, not the {inputs} inputs and "
            f"{outputs} outputs field 'probe' counts"
        )
    return Probe(
        tuple(tensors[n].to(where) for n in names[:inputs]), tuple(tensors[n] for n in names[inputs:]), seconds
    )


@dataclass(frozen=True)
class ProbeResult:
    outputs: list[OutputCheck]
    tolerance: Tolerance
    latency_s: float | None = None

    @property
    def failed(self) -> list[OutputCheck]:
        return [c for c in self.outputs if not c.passed]


def check(lowered: LoweredModule, probe: Probe, timed: bool = False) -> ProbeResult:
    """The module run on the probe's inputs, each output against eager's at the tolerance of the
    module's precision (int8 or FP8 steps where an engine has quantized layers), summed over its
    engines by taking the widest."""
    report = lowered.report
    tol = Tolerance(report.precision, any(e.int8_ops for e in report.engines), any(e.fp8_ops for e in report.engines))
    actual = call(lowered, probe.inputs)
    if len(actual) != len(probe.outputs):
        return ProbeResult([OutputCheck("outputs", float("inf"), False)], tol)
    checks = [check_output(f"output {i}", e, a, tol) for i, (e, a) in enumerate(zip(probe.outputs, actual))]
    return ProbeResult(checks, tol, latency(lowered, probe.inputs) if timed else None)


def rebuilt(manifest: dict[str, Any], carried: dict[str, list[Any]], backend: str) -> list[str]:
    """The TensorRT engines a load built (or took from the engine cache) for want of a plan in the
    file for this TensorRT and GPU: those all of whose plans were carried as other machines'."""
    if backend != "tensorrt":
        return []
    return [e["name"] for e in manifest["engines"] if len(carried.get(e["name"], [])) == len(e["plans"])]


def verify_rebuilt(lowered: LoweredModule, probe: Probe | None, rebuilt: list[str], path: object) -> None:
    """After a load that built engines again: the module against the probe; a warning and a
    report note naming each output that disagrees."""
    if not rebuilt or probe is None:
        return
    result = check(lowered, probe)
    if result.failed:
        worst = ", ".join(f"{c.name} off by {c.error:.3g} of its scale" for c in result.failed)
        note = (
            f"load: {', '.join(rebuilt)} built again here disagree(s) with the probe saved in {path}: {worst} "
            f"(tolerance {result.tolerance.describe()}); run `trt-lower verify` for details"
        )
        log.warning("trt_lower: %s", note)
        lowered.report.notes.append(note)
