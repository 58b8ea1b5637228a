"""Real models with random weights (nothing is downloaded) for the demo and the benchmarks.
torch is imported when a model is built, not with MODELS: the CLI lists their names in --help."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch

ModelAndInputs = tuple["torch.nn.Module", tuple["torch.Tensor", ...]]


def _torchvision(name: str) -> Callable[[int], ModelAndInputs]:
    def build(batch: int) -> ModelAndInputs:
        import torch
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        return model.eval(), (torch.randn(batch, 3, 224, 224),)

    return build


def _bert(batch: int) -> ModelAndInputs:
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig()  # bert-base-uncased's architecture
    model: torch.nn.Module = BertModel(config)
    return model.eval(), (torch.randint(0, config.vocab_size, (batch, 128)),)


MODELS: dict[str, Callable[[int], ModelAndInputs]] = {
    "resnet50": _torchvision("resnet50"),
    "resnet18": _torchvision("resnet18"),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "bert": _bert,
}


def build(name: str, batch: int = 1) -> ModelAndInputs:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}")
    try:
        return MODELS[name](batch)
    except ImportError as e:
        raise SystemExit(f"{name} needs {e.name}: pip install 'trt_lower[models]'") from None
