"""The NCCL communicator a TensorRT engine with collectives inside it (collectives="engine") runs
them on: the world process group's, handed to each execution context as TensorRT 11's
`IExecutionContext.set_communicator` takes it, a PyCapsule of the ncclComm_t (as NVIDIA's
attention_mdtrt sample makes it). The tensorrt stubs (10.x) lack that method: `give` calls it
through a typed view of the context."""

from __future__ import annotations

import ctypes
from typing import Callable, Protocol, cast

import torch
import torch.distributed as dist

from trt_lower.values.collectives import InEngineCollectivesError, refusal

# The capsule's name, as NVIDIA's sample writes it (kept alive: the capsule points at it).
_CAPSULE_NAME = b"ncclComm_t"


class _Communicating(Protocol):
    def set_communicator(self, communicator: object) -> bool: ...


def nccl_comm(group: dist.ProcessGroup) -> int:
    """The address of `group`'s ncclComm_t (ProcessGroupNCCL._comm_ptr, which torch's stubs do
    not declare); InEngineCollectivesError where the group's backend is not NCCL or its
    communicator is not made yet (NCCL makes it at the first collective, or at once when
    init_process_group is given a device_id)."""
    backend = dist.get_backend(group)
    if backend != "nccl":
        raise refusal(
            f"runs TensorRT's collectives on NCCL, and the process group's backend is {backend!r} "
            "(init_process_group('nccl'), or leave collectives='eager')"
        )
    pointer = int(getattr(group._get_backend(torch.device("cuda")), "_comm_ptr")())
    if not pointer:
        raise refusal(
            "needs the process group's NCCL communicator, which is not made yet: give init_process_group a "
            "device_id, or run a collective before loading the engines"
        )
    return pointer


# How a process group's communicator address is found: the seam tests replace (gloo standing in
# for NCCL on the TensorRT double, tests/trt_double/collectives.py).
comm_pointer: Callable[[dist.ProcessGroup], int] = nccl_comm


def _capsule(pointer: int) -> object:
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return cast(object, new(ctypes.c_void_p(pointer), _CAPSULE_NAME, None))


class Communicator:
    """The world process group's communicator for engine `engine`'s execution contexts. It holds
    the group, so the communicator outlives the contexts given it (a module keeps its
    Communicator as long as its contexts)."""

    def __init__(self, engine: str) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise refusal(f"{engine}: the engine runs collectives, and this process has joined no process group")
        group = dist.group.WORLD
        assert group is not None  # initialized
        self.group = group
        self.engine = engine
        try:
            self.capsule = _capsule(comm_pointer(group))
        except InEngineCollectivesError as e:
            raise InEngineCollectivesError(f"{engine}: {e}") from None

    def give(self, context: object, errors: Callable[[], str]) -> None:
        """Set the communicator on `context`; InEngineCollectivesError naming the engine when
        TensorRT refuses it (`errors`: what TensorRT logged)."""
        if not cast(_Communicating, context).set_communicator(self.capsule):
            raise refusal(f"{self.engine}: TensorRT refused the communicator: {errors() or 'no reason given'}")
