"""Generation with a causal LM (random weights from a config; CPU, ONNX Runtime): time to first
token and per-token decode latency, side by side in one run, for

  lowered   trt_lower.llm.lower_causal_lm(model).generate(...)  (one step engine, cache buffers in place)
  eager     model.generate(...)                                  (transformers, DynamicCache)
  recompute the full forward lowered with lower_to_trt (sequence 1..max_length), re-run over the
            whole prefix for each new token (what a user could do before trt_lower.llm)

    python bench/bench_generate.py [--config tiny|qwen2-0.5b] [--prompts 32,128] [--new 64,256]
                                   [--repeats 3] [--recompute-every 1]

Configs: `tiny` is a Llama of hidden 128, 4 layers, GQA 4/2, vocab 1024; `qwen2-0.5b` has
Qwen2-0.5B's sizes (hidden 896, 24 layers, GQA 14/2, vocab 151936, tied embeddings: 494 M
parameters, 1.8 GiB in float32). Per configuration the three run in turn, `--repeats` rounds;
medians. Time to first token is a 1-token generation; decode per token is (time of N tokens - time
to first token) / (N - 1), greedy. With `--recompute-every K` > 1 the recompute baseline is not run
token by token: its full forward is timed at every K-th prefix length of the N - 1 decode steps
(best of three each, in the baseline's favour) and those times averaged, since a forward's cost
depends on the prefix length alone; that keeps a 0.5 B run to minutes. Memory: the process's RSS
after each lowered decode step of the longest run (a logits processor reads it).
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


def recompute_sampled(
    lowered: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor, new: int, every: int
) -> tuple[float, float]:
    """(time to first token, decode seconds per token) of recompute from its forward timed at
    every `every`-th prefix length of the decode steps, best of three (in the baseline's favour)."""

    def forward(length: int) -> float:
        prefix = torch.randint(3, 1024, (ids.shape[0], length))
        return min(seconds(lambda: lowered(prefix).argmax(-1)) for _ in range(3))

    lengths = range(ids.shape[1] + 1, ids.shape[1] + new, every)
    return forward(ids.shape[1]), statistics.mean(forward(n) for n in lengths)


def seconds(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def tiny() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=1024,
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )


def qwen2_half_billion() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            tie_word_embeddings=True,
            max_position_embeddings=32768,
        )
    )


CONFIGS: dict[str, Callable[[], torch.nn.Module]] = {"tiny": tiny, "qwen2-0.5b": qwen2_half_billion}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", default="32,128")
    parser.add_argument("--new", default="64,256")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--recompute-every", type=int, default=1)
    args = parser.parse_args()
    prompts = [int(p) for p in args.prompts.split(",")]
    news = [int(n) for n in args.new.split(",")]
    torch.manual_seed(0)
    model: Any = CONFIGS[args.config]()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    max_length = max(prompts) + max(news)
    start = time.perf_counter()
    gen = lower_causal_lm(model, max_batch=1, max_length=max_length)
    lowering = time.perf_counter() - start
    full = trt_lower.lower_to_trt(Logits(model), (TensorSpec((1, 1), (1, max_length), (1, max_length), torch.int64),))
    print(
        f"{args.config}: {type(model).__name__}, {params / 1e6:.0f} M parameters; max_length {max_length}; "
        f"step lowered in {lowering:.1f} s, coverage {gen.report.coverage:.3f}, {len(gen.report.engines)} engine; "
        f"recompute model coverage {full.report.coverage:.3f}; threads {torch.get_num_threads()}"
    )

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
                sampled: list[tuple[float, float]] = []
                for _ in range(args.repeats):
                    for name, run in runners.items():
                        if name == "recompute" and args.recompute_every > 1:
                            sampled.append(recompute_sampled(full, ids, new, args.recompute_every))
                            continue
                        first[name].append(seconds(lambda: run(ids, 1)))
                        total[name].append(seconds(lambda: run(ids, new)))
                ttft = {k: statistics.median(v) for k, v in first.items() if v}
                decode = {k: (statistics.median(total[k]) - ttft[k]) / (new - 1) for k in ttft}
                if sampled:
                    ttft["recompute"] = statistics.median(t for t, _ in sampled)
                    decode["recompute"] = statistics.median(d for _, d in sampled)
                for name in runners:
                    print(
                        f"| {prompt} | {new} | {name} | {ttft[name] * 1e3:.2f} | {decode[name] * 1e3:.3f} | "
                        f"{decode['eager'] / decode[name]:.2f}x | {decode['recompute'] / decode[name]:.2f}x |"
                    )
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
        gen.generate(ids, max_new_tokens=max(news), logits_processor=LogitsProcessorList([rss]), **greedy)
        s = rss.samples
        print(
            f"RSS over {len(s)} lowered decode steps (MiB): step 1 {s[0]:.1f}, step {len(s) // 16} {s[len(s) // 16 - 1]:.1f}, "
            f"step {len(s)} {s[-1]:.1f}; growth {len(s) // 16}->{len(s)} {s[-1] - s[len(s) // 16 - 1]:+.1f} MiB"
        )


if __name__ == "__main__":
    main()
