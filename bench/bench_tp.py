"""Tensor-parallel generation on CPU (gloo, ONNX Runtime): per-rank peak RSS, engine weight bytes
and decode latency of `lower_causal_lm` on a Llama sharded over 1, 2 and 4 ranks.

    python bench/bench_tp.py [--ranks 1,2,4] [--hidden 512] [--layers 4] [--prompt 16] [--new 16]
                             [--repeats 3]

1 rank is the unsharded model (no process group); N > 1 ranks run under torch.distributed.run on
127.0.0.1, the model sharded with PyTorch's colwise/rowwise plan (q/k/v/gate/up colwise, o/down
rowwise, the embedding split along the hidden size; the LM head replicated, as generation needs).
The config: Llama of `--hidden`, `--layers`, 8 query heads and 4 key/value heads (GQA; 4 divides
by every rank count), MLP 2.75x, vocab 1024, float32. Each rank builds the whole model (same seed)
and shards it in place, so its peak RSS (ru_maxrss, after generating) includes one unsharded copy; the
engine weight bytes are what its engines hold. Decode ms/token = (time of `--new` tokens - time of
1) / (`--new` - 1), greedy, median of `--repeats`; first-token ms = the time of 1 (the prompt's
steps: on more than 2 ranks the capture narrows the step to ranks - 1 tokens and the prompt runs
in chunks of that many, the `chunk` column); every rank generates and reports its own row.
Verified on CPU via ONNX Runtime and gloo; no GPU figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from trt_lower.llm import lower_causal_lm  # noqa: E402


def _model(hidden: int, layers: int) -> Any:
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=hidden,
        intermediate_size=int(hidden * 2.75),
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
    )
    return transformers.LlamaForCausalLM(config).eval()  # type: ignore[no-untyped-call]


def _shard(model: Any) -> Any:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

    plan: dict[str, ParallelStyle] = {"model.embed_tokens": ColwiseParallel(output_layouts=Replicate())}
    for i in range(model.config.num_hidden_layers):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    return parallelize_module(model, init_device_mesh("cpu", (dist.get_world_size(),)), plan)


def _generate_s(lowered: Any, ids: torch.Tensor, new: int) -> float:
    start = time.perf_counter()
    lowered.generate(ids, max_new_tokens=new, do_sample=False, min_new_tokens=new)
    return time.perf_counter() - start


def worker(args: argparse.Namespace) -> None:
    """One rank (or the only process): lower, generate, print one JSON line."""
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    model = _model(args.hidden, args.layers)
    model_bytes = sum(p.nbytes for p in model.parameters())
    if distributed:
        model = _shard(model)
    lowered = lower_causal_lm(model, max_batch=1, max_length=args.prompt + args.new, verify=False)
    ids = torch.randint(0, 1024, (1, args.prompt), generator=torch.Generator().manual_seed(1))
    _generate_s(lowered, ids, 2)  # warm-up
    per_token, first_token = [], []
    for _ in range(args.repeats):
        first, whole = _generate_s(lowered, ids, 1), _generate_s(lowered, ids, args.new)
        per_token.append((whole - first) / (args.new - 1) * 1e3)
        first_token.append(first * 1e3)
    row = {
        "rank": int(os.environ.get("RANK", 0)),
        "ranks": int(os.environ.get("WORLD_SIZE", 1)),
        "decode_ms_per_token": round(statistics.median(per_token), 2),
        "first_token_ms": round(statistics.median(first_token), 1),
        "prefill_chunk": lowered.prefill_chunk,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "engine_weight_mib": round(sum(e.weight_bytes for e in lowered.step.report.engines) / 2**20, 2),
        "model_weight_mib": round(model_bytes / 2**20, 2),
    }
    os.write(1, f"ROW {json.dumps(row)}\n".encode())  # one write: the ranks share the launcher's pipe
    if distributed:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(args: argparse.Namespace, ranks: int) -> list[dict[str, Any]]:
    """The rows of a run on `ranks` processes (1: this interpreter, without torch.distributed)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", *sys.argv[1:]]
    if ranks > 1:
        command[1:1] = ["-m", "torch.distributed.run", f"--nproc-per-node={ranks}", "--master-addr=127.0.0.1"]
        command.insert(5, f"--master-port={_free_port()}")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
    rows = [json.loads(line[4:]) for line in out.stdout.splitlines() if line.startswith("ROW ")]
    if out.returncode or len(rows) != ranks:
        sys.exit(f"{ranks} rank(s) failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return sorted(rows, key=lambda r: r["rank"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--new", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per rank count")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs; verified on CPU via ONNX Runtime and gloo")
    print("ranks rank decode_ms/token first_token_ms chunk peak_RSS_MiB engine_weights_MiB model_weights_MiB")
    for ranks in (int(r) for r in args.ranks.split(",")):
        for row in launch(args, ranks):
            print(
                f"{ranks:5} {row['rank']:4} {row['decode_ms_per_token']:15} {row['first_token_ms']:14} "
                f"{row['prefill_chunk']:5} {row['peak_rss_mib']:12} "
                f"{row['engine_weight_mib']:18} {row['model_weight_mib']:17}",
                flush=True,
            )


if __name__ == "__main__":
    main()
