"""What the index checks (trt_lower/capture/index_checks.py) and generate()'s per-call cache
buffers (trt_lower/llm/generation.py) cost per call, on CPU via ONNX Runtime.

    python bench/bench_guards.py [--calls 2000] [--rounds 5]

Index checks: each model is lowered twice (min_block_size=1: all in one engine), as trt_lower lowers it and with the checks left out
(`guard_indices` replaced by a no-op, for this measurement only); the two are called in
alternating blocks of `--calls` calls, `--rounds` rounds, and the median per-call time of each is
printed with their difference. Models: an embedding and a Linear (a few microseconds a call: the
worst case, all overhead) and a 2-layer BERT (hidden 64, sequence 32).

Buffers: the median time of taking and giving back one call's cache buffers (_BufferPool.taken,
a lock and a list pop/append), beside a 12-token greedy generate() of a tiny Llama.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable
from unittest import mock

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower.capture import aten_graph as capture_graph  # noqa: E402


class Tagger(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(1000, 16), torch.nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.embed(ids))
        return out


def _bert() -> tuple[torch.nn.Module, torch.Tensor]:
    import transformers

    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    model: torch.nn.Module = transformers.BertModel(config)
    return model.eval(), torch.randint(0, 500, (1, 32))


def _per_call_us(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def index_checks(name: str, model: torch.nn.Module, ids: torch.Tensor, calls: int, rounds: int) -> None:
    checked = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", min_block_size=1)
    with mock.patch.object(capture_graph, "guard_indices", lambda gm: None):
        unchecked = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", min_block_size=1)
    times: dict[str, list[float]] = {"checked": [], "unchecked": []}
    with torch.inference_mode():
        for module in (checked, unchecked):
            _per_call_us(lambda: module(ids), 50)  # warm-up
        for _ in range(rounds):
            for label, module in (("checked", checked), ("unchecked", unchecked)):
                times[label].append(_per_call_us(lambda: module(ids), calls))
    a, b = statistics.median(times["checked"]), statistics.median(times["unchecked"])
    print(
        f"{name:8s} checked {a:8.1f} us/call   unchecked {b:8.1f} us/call   difference {a - b:+7.1f} us "
        f"({(a - b) / b:+.1%})"
    )


def buffers(calls: int) -> None:
    import transformers

    from trt_lower.llm import lower_causal_lm

    torch.manual_seed(0)
    model: Any = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )
    model.eval()
    gen = lower_causal_lm(model, max_batch=2, max_length=32)
    pool = gen._buffers

    def take() -> None:
        with pool.taken():
            pass

    take_us = statistics.median(_per_call_us(take, calls) for _ in range(5))
    ids = torch.randint(3, 96, (1, 8))

    def generate() -> None:
        gen.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)

    generate()
    generate_us = statistics.median(_per_call_us(generate, 5) for _ in range(3))
    print(f"buffers  take + give back {take_us:.2f} us/call; a 12-token generate() {generate_us / 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
    torch.manual_seed(0)
    index_checks("tagger", Tagger().eval(), torch.randint(0, 1000, (1, 8)), args.calls, args.rounds)
    index_checks("bert", *_bert(), max(args.calls // 10, 50), args.rounds)
    buffers(args.calls)


if __name__ == "__main__":
    main()
