"""collectives= reaches lower_to_trt from its other doors: `trt-lower lower --collectives` and
lower_causal_lm's options. The refusal where collectives cannot run inside an engine (ONNX Runtime)
names the option from each, as from lower_to_trt (tests/test_collectives_in_engine.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trt_lower
from trt_lower.cli import commands as cli

REFUSAL = "collectives='engine' runs on the tensorrt backend only"


def test_lower_command_passes_collectives_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "linear_model.py").write_text("import torch\n\ndef make():\n    return torch.nn.Linear(3, 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["lower", "linear_model:make", "--input", "2x3", "--backend", "onnxruntime", "-o", str(tmp_path / "m.trtl")]
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--collectives", "engine"])
    assert re.fullmatch(rf"trt-lower lower: InEngineCollectivesError: {re.escape(REFUSAL)}.*", str(exited.value.code))
    assert cli.main([*argv, "--collectives", "eager"]) == 0


def test_lower_causal_lm_passes_collectives_on() -> None:
    transformers = pytest.importorskip("transformers")
    from trt_lower.llm import lower_causal_lm

    config = transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    with pytest.raises(trt_lower.InEngineCollectivesError, match=re.escape(REFUSAL)):
        lower_causal_lm(model, max_batch=1, max_length=8, backend="onnxruntime", collectives="engine")
