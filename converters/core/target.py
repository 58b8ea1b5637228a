"""TensorRT-version policy: the versions converters emit for, how an installed TensorRT's
version maps to one, and what each allows (docs/tensorrt.md has the facts behind it).

lower_to_trt makes the target from the `trt_version` setting and passes it to splitting and
conversion; every capability check is given it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Oldest first. "10.4" is the last TensorRT with Volta (V100) support and stands for 10.0-10.11:
# what its table allows, all of those parse alike, since every axes/K operand we emit is an
# initializer. "10.12" stands for 10.12-10.14 (Einsum ellipsis/diagonal from 10.12); "latest" for
# 10.15 and newer, 11.x included: the parsers that read opset 23's fused Attention,
# RMSNormalization and RotaryEmbedding, and INT4/FP4 Q/DQ.
VERSIONS = ("8.6", "10.4", "10.12", "latest")
# Without TensorRT installed: the newest version every GPU generation still has (V100 included).
DEFAULT = "10.4"

# Highest ONNX opset each version's parser reads (docs/tensorrt.md; 10.12-10.14: at least 10.0's).
_MAX_OPSET = {"8.6": 17, "10.4": 20, "10.12": 20, "latest": 24}
# The opset we emit: 17 where a higher one buys nothing TensorRT runs better (8.6 cannot read more);
# 23 for "latest": FP8 (19), INT4 and blocked quantization (21), FP4 and the fused ops (23).
_OPSET = {"8.6": 17, "10.4": 17, "10.12": 17, "latest": 23}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# The TensorRT releases each target stands for: [first, first of the next target).
_SPANS: dict[str, tuple[tuple[int, int], tuple[int, int] | None]] = {
    "8.6": ((8, 6), (10, 0)),
    "10.4": ((10, 0), (10, 12)),
    "10.12": ((10, 12), (10, 15)),
    "latest": ((10, 15), None),
}


@dataclass(frozen=True)
class TrtTarget:
    version: str

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            raise ValueError(f"trt_version must be one of {VERSIONS}, got {self.version!r}")

    @property
    def label(self) -> str:
        return {"10.12": "TensorRT 10.12-10.14", "latest": "TensorRT 10.15+"}.get(
            self.version, f"TensorRT {self.version}"
        )

    def at_least(self, version: str) -> bool:
        return VERSIONS.index(self.version) >= VERSIONS.index(version)

    def may_run(self, since: tuple[int, int], fixed: tuple[int, int] | None) -> bool:
        """Whether a TensorRT release this target stands for lies in [since, fixed) (None: not fixed)."""
        first, after = _SPANS[self.version]
        return (fixed is None or first < fixed) and (after is None or since < after)

    @property
    def int64_native(self) -> bool:
        """9.0+ computes INT64; 8.6's parser casts INT64 to INT32 (clamping), engine I/O included."""
        return self.at_least("10.4")

    @property
    def max_opset(self) -> int:
        """The highest ONNX opset this target's parser reads."""
        return _MAX_OPSET[self.version]

    @property
    def opset(self) -> int:
        """The ONNX opset converters emit for this target."""
        return _OPSET[self.version]

    def bf16_reason(self) -> str | None:
        """Why engines for this target cannot carry bfloat16, or None (10.12+ on Ampere and newer)."""
        if self.version == "8.6":
            return "TensorRT 8.6 has no bfloat16 (it arrived in 9.0)"
        if self.version == "10.4":
            return "target TensorRT 10.4 stands for V100 (Volta) GPUs, which have no bfloat16"
        return None

    def fp8_reason(self) -> str | None:
        """Why engines for this target cannot carry FP8 (E4M3), or None: TensorRT computes FP8 from
        9.0 on Ada and Hopper and newer, reading it from opset-19 QuantizeLinear/DequantizeLinear."""
        if self.version == "8.6":
            return "TensorRT 8.6 has no FP8 (it arrived in 9.0) and its parser reads opset 17 at most"
        if self.version == "10.4":
            return "target TensorRT 10.4 stands for V100 (Volta) GPUs, which have no FP8 (Ada/Hopper and newer)"
        if self.opset < 19:
            return (
                f"FP8 QuantizeLinear/DequantizeLinear need ONNX opset 19, and trt_lower emits opset {self.opset} "
                f"for {self.label}"
            )
        return None

    def int32_reason(self, what: str, low: int, high: int) -> str | None:
        """Why integer values in [low, high] (`what`) cannot be computed as they are: on a
        target without native int64 (8.6 computes int64 as int32, clamping) when they do not
        fit int32; None when they can."""
        if self.int64_native or _INT32_MIN <= low <= high <= _INT32_MAX:
            return None
        return f"{what} does not fit int32, which {self.label} computes int64 in"


def for_installed(major: int, minor: int) -> str:
    """The target matching an installed TensorRT's version (e.g. 10.4.0.26 -> '10.4')."""
    if major < 10:
        return "8.6"  # older ones are refused as a backend (trt_lower.engine.tensorrt.MIN_VERSION)
    if (major, minor) < (10, 12):
        return "10.4"
    return "10.12" if (major, minor) < (10, 15) else "latest"
