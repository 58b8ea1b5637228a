"""Models the TensorRT-path tests lower, built identically in the test process and in the fresh
processes they start: same seed, same weights, same ONNX, so the same engine cache keys.

`python trt_models.py NAME...` (with tests/ and tests/trt_double on PYTHONPATH, so `tensorrt` is
the double) lowers the named models with backend="tensorrt", checks them against eager and prints
{"NAME": [cache hit per engine], ..., "builds": engines the double built} as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

import torch
import torchvision
import transformers

import trt_lower
from trt_lower.values import device

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


def resnet18() -> Example:
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 32, 32),)


def bert() -> Example:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    return transformers.BertModel(config).eval(), (torch.randint(0, config.vocab_size, (2, 16)),)


def llama_config(**overrides: Any) -> transformers.LlamaConfig:
    """A tiny Llama's configuration (rotary embeddings, grouped-query attention), the one the
    suite's Llama tests share; `overrides` change or add settings."""
    settings: dict[str, Any] = dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=500,
        max_position_embeddings=64,
    )
    return transformers.LlamaConfig(**{**settings, **overrides})


MODELS: dict[str, Callable[[], Example]] = {"resnet18": resnet18, "bert": bert}


def lower_and_check(name: str) -> trt_lower.LoweredModule:
    model, inputs = MODELS[name]()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt")
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)
    return lowered


def main(names: list[str]) -> None:
    import tensorrt
    from trt_double.device import HostDevice

    with device.using(HostDevice()):
        hits = {name: [e.cache_hit for e in lower_and_check(name).report.engines] for name in names}
    print(json.dumps({**hits, "builds": tensorrt.state.builds}))


if __name__ == "__main__":
    main(sys.argv[1:])
