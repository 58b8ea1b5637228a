"""Generation with a causal LM (random weights from a config; CPU, ONNX Runtime): time to first
token and per-token decode latency, side by side in one run, for

  lowered   trt_lower.llm.lower_causal_lm(model).generate(...)  (one step engine, cache buffers in place)
  before    the same, by the code of git revision `--before REV` (e.g. 921fde3, whose step attends
            over the whole max_length buffer, masked), in a worker process asked round by round
  eager     model.generate(...)                                  (transformers, DynamicCache)
  recompute the full forward lowered with lower_to_trt (sequence 1..max_length), re-run over the
            whole prefix for each new token (what a user could do before trt_lower.llm)

    python bench/bench_generate.py [--config tiny|qwen2-0.5b] [--prompts 32,128] [--new 64,256]
                                   [--repeats 3] [--recompute-every 1] [--before REV]
                                   [--contenders lowered,eager,recompute] [--max-length N]

Configs: `tiny` is a Llama of hidden 128, 4 layers, GQA 4/2, vocab 1024; `qwen2-0.5b` has
Qwen2-0.5B's sizes (hidden 896, 24 layers, GQA 14/2, vocab 151936, tied embeddings: 494 M
parameters, 1.8 GiB in float32). Per configuration the three run in turn, `--repeats` rounds;
medians. Time to first token is a 1-token generation; decode per token is (time of N tokens - time
to first token) / (N - 1), greedy. With `--recompute-every K` > 1 the recompute baseline is not run
token by token: its full forward is timed at every K-th prefix length of the N - 1 decode steps
(best of three each, in the baseline's favour) and those times averaged, since a forward's cost
depends on the prefix length alone; that keeps a 0.5 B run to minutes. Memory: the process's RSS
after each lowered decode step of the longest run (a logits processor reads it). The worker of
`--before` runs this file's own code against REV's trt_lower (extracted with `git archive`), with
the same model (same seed) and prompts; it lowers first, alone, and then idles while the others run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower import TensorSpec  # noqa: E402
from trt_lower.llm import lower_causal_lm  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GREEDY: dict[str, Any] = dict(do_sample=False, pad_token_id=0)


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


def prompt_ids(prompt: int) -> torch.Tensor:
    """The prompt of `prompt` tokens, the same in every process."""
    return torch.randint(3, 1024, (1, prompt), generator=torch.Generator().manual_seed(prompt))


def first_and_total(run: Callable[[torch.Tensor, int], Any], prompt: int, new: int) -> tuple[float, float]:
    """Seconds of a 1-token generation (time to first token) and of a `new`-token one."""
    ids = prompt_ids(prompt)
    return seconds(lambda: run(ids, 1)), seconds(lambda: run(ids, new))


def serve(config: str, max_length: int) -> None:
    """The `--before` worker: lowers the model with this process's trt_lower, then answers
    `time PROMPT NEW` (first_and_total) and `tokens PROMPT NEW` (the greedy tokens), one JSON
    line each, until stdin closes."""
    torch.manual_seed(0)
    model: Any = CONFIGS[config]()  # main's model, the same seed
    gen = lower_causal_lm(model.eval(), max_batch=1, max_length=max_length)

    def run(ids: torch.Tensor, n: int) -> Any:
        return gen.generate(ids, max_new_tokens=n, **GREEDY)

    print("REPLY " + json.dumps("ready"), flush=True)
    with torch.no_grad():
        for line in sys.stdin:
            command, prompt, new = line.split()
            if command == "time":
                reply: Any = first_and_total(run, int(prompt), int(new))
            else:
                reply = run(prompt_ids(int(prompt)), int(new)).tolist()
            print("REPLY " + json.dumps(reply), flush=True)


class Before:
    """Generation by the trt_lower of git revision `rev`, in a worker process (`serve`)."""

    def __init__(self, rev: str, config: str, max_length: int) -> None:
        self.tree = tempfile.TemporaryDirectory(prefix="bench_generate_")
        archive = subprocess.run(
            ["git", "-C", ROOT, "archive", rev, "trt_lower", "converters", "splitter"], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(self.tree.name, filter="data")
        # This file beside REV's packages: its sys.path line puts them first.
        script = os.path.join(self.tree.name, "bench", "bench_generate.py")
        os.makedirs(os.path.dirname(script))
        shutil.copy(__file__, script)
        command = [sys.executable, script, "--serve", "--config", config, "--max-length", str(max_length)]
        self.worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.reply()  # lowered

    def reply(self) -> Any:
        assert self.worker.stdout is not None
        for line in self.worker.stdout:
            if line.startswith("REPLY "):
                return json.loads(line.removeprefix("REPLY "))
        raise RuntimeError(f"the --before worker ended (exit status {self.worker.wait()})")

    def ask(self, command: str, prompt: int, new: int) -> Any:
        assert self.worker.stdin is not None
        self.worker.stdin.write(f"{command} {prompt} {new}\n")
        self.worker.stdin.flush()
        return self.reply()

    def close(self) -> None:
        if self.worker.stdin is not None:
            self.worker.stdin.close()
        self.worker.wait(timeout=60)
        self.tree.cleanup()


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
    parser.add_argument("--before", metavar="REV", help="also time lower_causal_lm as of this git revision")
    parser.add_argument("--contenders", default="lowered,eager,recompute")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the --before worker
    parser.add_argument("--max-length", type=int, help="the cache's positions (default: longest prompt + most new)")
    args = parser.parse_args()
    if args.serve:
        return serve(args.config, args.max_length)
    prompts = [int(p) for p in args.prompts.split(",")]
    news = [int(n) for n in args.new.split(",")]
    contenders = args.contenders.split(",") + (["before"] if args.before else [])
    max_length = args.max_length or max(prompts) + max(news)
    before = Before(args.before, args.config, max_length) if args.before else None  # lowers first, alone
    torch.manual_seed(0)
    model: Any = CONFIGS[args.config]()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    gen = lower_causal_lm(model, max_batch=1, max_length=max_length)
    lowering = time.perf_counter() - start
    full: Any = None
    if "recompute" in contenders:
        spec = TensorSpec((1, 1), (1, max_length), (1, max_length), torch.int64)
        full = trt_lower.lower_to_trt(Logits(model), (spec,))
    print(
        f"{args.config}: {type(model).__name__}, {params / 1e6:.0f} M parameters; max_length {max_length}; "
        f"step lowered in {lowering:.1f} s, coverage {gen.report.coverage:.3f}, {len(gen.report.engines)} engine; "
        f"before: {args.before or '-'}; threads {torch.get_num_threads()}"
    )

    local: dict[str, Callable[[torch.Tensor, int], Any]] = {
        "lowered": lambda ids, n: gen.generate(ids, max_new_tokens=n, **GREEDY),
        "eager": lambda ids, n: model.generate(ids, max_new_tokens=n, **GREEDY),
        "recompute": lambda ids, n: recompute(full, ids, n),
    }

    def timed(name: str, prompt: int, new: int) -> tuple[float, float]:
        """(time to first token, decode seconds per token) of one round."""
        if name == "recompute" and args.recompute_every > 1:
            return recompute_sampled(full, prompt_ids(prompt), new, args.recompute_every)
        if name == "before":
            assert before is not None
            first, total = before.ask("time", prompt, new)
        else:
            first, total = first_and_total(local[name], prompt, new)
        return first, (total - first) / (new - 1)

    others = [c for c in contenders if c != "lowered"]
    print(f"\n| prompt | new | | TTFT ms | decode ms/token | {' | '.join(f'lowered decode vs {c}' for c in others)} |")
    print("|---|---|---|---|---|" + "---|" * len(others))
    with torch.no_grad():
        for prompt in prompts:
            for name in contenders:  # warm-up
                timed(name, prompt, 2)
            for new in news:
                rounds = [[timed(name, prompt, new) for name in contenders] for _ in range(args.repeats)]
                ttft = {c: statistics.median(r[i][0] for r in rounds) for i, c in enumerate(contenders)}
                decode = {c: statistics.median(r[i][1] for r in rounds) for i, c in enumerate(contenders)}
                for name in contenders:
                    ratios = [f"{decode[c] / decode['lowered']:.2f}x" if name == "lowered" else "" for c in others]
                    print(
                        f"| {prompt} | {new} | {name} | {ttft[name] * 1e3:.2f} | {decode[name] * 1e3:.3f} | "
                        + " | ".join(ratios)
                        + " |"
                    )
        prompt, new = prompts[-1], min(news)
        expected = model.generate(prompt_ids(prompt), max_new_tokens=new, **GREEDY)
        same = torch.equal(local["lowered"](prompt_ids(prompt), new), expected)
        print(f"\nlowered and eager greedy tokens identical ({new} new, prompt {prompt}): {same}")
        if before is not None:
            same = before.ask("tokens", prompt, new) == expected.tolist()
            print(f"before and eager greedy tokens identical ({new} new, prompt {prompt}): {same}")
            before.close()

        class Rss:
            def __init__(self) -> None:
                self.samples: list[float] = []

            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                self.samples.append(rss_mib())
                return scores

        from transformers import LogitsProcessorList

        rss = Rss()
        gen.generate(
            prompt_ids(prompts[0]), max_new_tokens=max(news), logits_processor=LogitsProcessorList([rss]), **GREEDY
        )
        s = rss.samples
        print(
            f"RSS over {len(s)} lowered decode steps (MiB): step 1 {s[0]:.1f}, step {len(s) // 16} {s[len(s) // 16 - 1]:.1f}, "
            f"step {len(s)} {s[-1]:.1f}; growth {len(s) // 16}->{len(s)} {s[-1] - s[len(s) // 16 - 1]:+.1f} MiB"
        )


if __name__ == "__main__":
    main()
