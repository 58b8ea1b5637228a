"""A double of the TensorRT Python API, backed by ONNX Runtime, that runs trt_lower's TensorRT
path on machines without a GPU.

`double.py` implements the subset trt_lower uses, type-checked against NVIDIA's stubs (each class
derives from its stub class when mypy looks, so every override must match the real signature).
`activate.trt_double(version, cache_dir)` makes `tensorrt` the double for a block (the tests'
`trt_double` fixture); in a fresh process, putting this folder on sys.path makes `import tensorrt`
resolve to it (`tensorrt/__init__.py`). `device.HostDevice` points trt_lower's device seam at the CPU;
`torch_cuda.TorchCuda` models `torch.cuda` on two GPUs, to run the seam's CUDA implementation itself.
"""

from pathlib import Path

PATH = Path(__file__).resolve().parent
