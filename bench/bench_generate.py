"""Generation with a causal LM (tiny Llama config, random weights; CPU, ONNX Runtime): time to
first token and per-token decode latency, side by side in one run, for

  lowered   trt_lower.llm.lower_causal_lm(model).generate(...)  (one step engine, cache buffers in place)
  eager     model.generate(...)                                  (transformers, DynamicCache)
  recompute the full forward lowered with lower_to_trt (sequence 1..max_length), re-run over the
            whole prefix for each new token (what a user could do before trt_lower.llm)

    python bench/bench_generate.py [--prompts 32,128] [--new 64,256] [--repeats 3] [--hidden 128 --layers 4]

Per configuration the three run in turn, `--repeats` rounds; medians. Time to first token is a
1-token generation; decode per token is (time of N tokens - time to first token) / (N - 1), greedy.
Memory: the process's RSS after each of 256 lowered decode steps (a logits processor reads it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower import TensorSpec  # noqa: E402
from trt_lower.llm import lower_causal_lm  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


class Logits(torch.nn.Module):
    """The model's full forward, no cache: the prefix-recompute baseline's model."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model(ids, use_cache=False, logits_to_keep=1).logits
        return logits[:, -1]


def recompute(lowered: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor, new: int) -> torch.Tensor:
    for _ in range(new):
        ids = torch.cat([ids, lowered(ids).argmax(-1, keepdim=True)], dim=1)
    return ids


def seconds(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", default="32,128")
    parser.add_argument("--new", default="64,256")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    prompts = [int(p) for p in args.prompts.split(",")]
    news = [int(n) for n in args.new.split(",")]
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2)
    model: Any = LlamaForCausalLM(config)
    model.eval()
    max_length = max(prompts) + max(news)
    start = time.perf_counter()
    gen = lower_causal_lm(model, max_batch=1, max_length=max_length)
    lowering = time.perf_counter() - start
    full = trt_lower.lower_to_trt(Logits(model), (TensorSpec((1, 1), (1, max_length), (1, max_length), torch.int64),))
    print(f"tiny Llama: hidden {args.hidden}, {args.layers} layers, vocab 1024, GQA 4/2; max_length {max_length}; "
          f"step lowered in {lowering:.1f} s, coverage {gen.report.coverage:.3f}, {len(gen.report.engines)} engine; "
          f"recompute model coverage {full.report.coverage:.3f}; threads {torch.get_num_threads()}")

    greedy: dict[str, Any] = dict(do_sample=False, pad_token_id=0)
    runners: dict[str, Callable[[torch.Tensor, int], Any]] = {
        "lowered": lambda ids, n: gen.generate(ids, max_new_tokens=n, **greedy),
        "eager": lambda ids, n: model.generate(ids, max_new_tokens=n, **greedy),
        "recompute": lambda ids, n: recompute(full, ids, n),
    }
    print("\n| prompt | new | | TTFT ms | decode ms/token | decode vs eager | decode vs recompute |")
    print("|---|---|---|---|---|---|---|")
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.randint(3, 1024, (1, prompt))
            for name, run in runners.items():  # warm-up (and the tokens agree)
                run(ids, 2)
            for new in news:
                first: dict[str, list[float]] = {k: [] for k in runners}
                total: dict[str, list[float]] = {k: [] for k in runners}
                for _ in range(args.repeats):
                    for name, run in runners.items():
                        first[name].append(seconds(lambda: run(ids, 1)))
                        total[name].append(seconds(lambda: run(ids, new)))
                ttft = {k: statistics.median(v) for k, v in first.items()}
                decode = {k: (statistics.median(total[k]) - ttft[k]) / (new - 1) for k in runners}
                for name in runners:
                    print(f"| {prompt} | {new} | {name} | {ttft[name] * 1e3:.2f} | {decode[name] * 1e3:.3f} | "
                          f"{decode['eager'] / decode[name]:.2f}x | {decode['recompute'] / decode[name]:.2f}x |")
        same = torch.equal(runners["lowered"](ids, 32), runners["eager"](ids, 32))
        print(f"\nlowered and eager greedy tokens identical (32 new, prompt {prompts[-1]}): {same}")

        class Rss:
            def __init__(self) -> None:
                self.samples: list[float] = []

            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                self.samples.append(rss_mib())
                return scores

        from transformers import LogitsProcessorList
        rss = Rss()
        ids = torch.randint(3, 1024, (1, prompts[0]))
        gen.generate(ids, max_new_tokens=256, logits_processor=LogitsProcessorList([rss]), **greedy)
        s = rss.samples
        print(f"RSS over 256 lowered decode steps (MiB): step 1 {s[0]:.1f}, step 16 {s[15]:.1f}, "
              f"step 128 {s[127]:.1f}, step 256 {s[-1]:.1f}; growth 16->256 {s[-1] - s[15]:+.1f} MiB")


if __name__ == "__main__":
    main()
