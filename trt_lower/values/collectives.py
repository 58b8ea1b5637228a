"""collectives="engine": torch.distributed's functional collectives run inside TensorRT engines,
as TensorRT 11's DistCollective layers over NCCL (docs/distributed-lowering.md, "Collectives
inside an engine"). The option's values and the one error each refusal of it raises."""

from __future__ import annotations

from converters.core.errors import TrtLowerError

# "eager": between engines, through torch.distributed (the default); "engine": inside them.
COLLECTIVES = ("eager", "engine")
# The first TensorRT release with the DistCollective layer and its ONNX importer.
FIRST_RELEASE = (11, 0)


class InEngineCollectivesError(TrtLowerError, ValueError):
    """collectives="engine" where it cannot run: a backend other than TensorRT, a TensorRT target
    older than 11.0, or a process group whose backend is not NCCL (TensorRT's collectives run on
    NCCL); the message names the option and why."""


def refusal(why: str) -> InEngineCollectivesError:
    return InEngineCollectivesError(f"collectives='engine' {why}")
