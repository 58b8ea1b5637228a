"""config.pbtxt: a Triton model configuration, in protobuf text format."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trt_lower.triton.signature import ModelSignature, TritonTensor

# Triton's data types (model_config.proto's DataType), by torch dtype.
DATA_TYPES = {
    torch.bool: "TYPE_BOOL",
    torch.uint8: "TYPE_UINT8",
    torch.int8: "TYPE_INT8",
    torch.int16: "TYPE_INT16",
    torch.int32: "TYPE_INT32",
    torch.int64: "TYPE_INT64",
    torch.float16: "TYPE_FP16",
    torch.bfloat16: "TYPE_BF16",
    torch.float32: "TYPE_FP32",
    torch.float64: "TYPE_FP64",
}

# Longest a request waits in the dynamic batcher for others to join it.
MAX_QUEUE_DELAY_US = 1000


@dataclass
class ModelConfig:
    name: str
    platform: str  # "python" (a backend), "tensorrt_plan" or "onnxruntime_onnx"
    signature: ModelSignature
    max_batch_size: int = 0
    instances: int = 1
    kind: str = "KIND_CPU"
    dynamic_batching: bool = True
    # Tensor names where the model file's differ from the signature's (a TensorRT plan's).
    renames: dict[str, str] = field(default_factory=dict)
    # compute capability ("8.0") -> plan file, for tensorrt_plan.
    cc_model_filenames: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    # A tensorrt_plan engine's optimization profiles: Triton's TensorRT backend uses profile 0
    # alone unless the instance group lists them, then picks one per request's shapes.
    profiles: int = 1

    def _tensor(self, t: TritonTensor) -> str:
        dtype = DATA_TYPES.get(t.dtype)
        if dtype is None:
            raise ValueError(f"tensor '{t.name}' has dtype {t.dtype}, which Triton has no type for")
        dims = t.dims[1:] if self.max_batch_size > 0 else t.dims
        # Triton wants at least one dim: a scalar is declared as [1], reshaped to [] per batch item;
        # a non-batching model cannot reshape to [] (Triton refuses the config), its Runner does.
        scalar = "dims: [ 1 ] reshape: { shape: [ ] }" if self.max_batch_size > 0 else "dims: [ 1 ]"
        shape = f"dims: [ {', '.join(map(str, dims))} ]" if dims else scalar
        optional = " optional: true" if t.optional else ""
        return f'  {{ name: "{_escape(self.renames.get(t.name, t.name))}" data_type: {dtype} {shape}{optional} }}'

    def text(self) -> str:
        sig = self.signature
        lines = [
            f'name: "{_escape(self.name)}"',
            'backend: "python"' if self.platform == "python" else f'platform: "{_escape(self.platform)}"',
            f"max_batch_size: {self.max_batch_size}",
            "input [\n" + ",\n".join(self._tensor(t) for t in sig.inputs) + "\n]",
            "output [\n" + ",\n".join(self._tensor(t) for t in sig.outputs) + "\n]",
            f"instance_group [ {{ kind: {self.kind} count: {self.instances}{self._profiles()} }} ]",
        ]
        if self.dynamic_batching and self.max_batch_size > 0:
            lines.append(f"dynamic_batching {{ max_queue_delay_microseconds: {MAX_QUEUE_DELAY_US} }}")
        lines += [
            f'cc_model_filenames {{ key: "{_escape(cc)}" value: "{_escape(f)}" }}'
            for cc, f in self.cc_model_filenames.items()
        ]
        lines += [
            f'parameters {{ key: "{_escape(k)}" value: {{ string_value: "{_escape(v)}" }} }}'
            for k, v in self.parameters.items()
        ]
        return "\n".join(lines) + "\n"

    def _profiles(self) -> str:
        if self.platform != "tensorrt_plan" or self.profiles < 2:
            return ""
        return " profile: [ " + ", ".join(f'"{k}"' for k in range(self.profiles)) + " ]"


# Every byte of a UTF-8 name outside printable ASCII, and the quote and backslash, as an octal
# escape (which protobuf's text parser, Triton's too, reads back as the same byte).
_ESCAPED = {byte: f"\\{byte:03o}" for byte in range(256) if not 0x20 <= byte < 0x7F or chr(byte) in '\\"'}


def _escape(value: str) -> str:
    """`value` as the inside of a protobuf text string: every name and value in config.pbtxt goes
    through it, so a quote, backslash or newline in a tensor name (from a tampered artifact's
    manifest) stays in that name instead of writing fields of its own."""
    return "".join(_ESCAPED.get(byte, chr(byte)) for byte in value.encode())
