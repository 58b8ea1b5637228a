"""Throughput and latency through Triton Inference Server: resnet18 lowered by trt_lower vs the
same model in eager PyTorch, both behind the same python-backend model.py.

    .venv/bin/python bench/bench_triton.py [--size 224] [--requests 96] [--json out.json]

Both models go into one repository, served by one tritonserver (nvidia-pytriton) on 127.0.0.1
with max_batch_size 8 and dynamic batching. The eager anchor is trt_lower's own capture of
resnet18 with no engine at all (min_block_size larger than the graph): the model.py, the
artifact loading, the DLPack exchange and the batching are identical, only the engines differ.
At each concurrency (1, 4, 8 gRPC clients, each sending its next request when the last one
answered) the two models take turns, `--requests` requests each, after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
import torchvision
import tritonclient.grpc as grpc
from numpy.typing import NDArray

import trt_lower
from trt_lower.triton import TritonServer, export_model_repository
from trt_lower.triton.server import free_ports

MAX_BATCH = 8


def run_level(url: str, model: str, x: NDArray[np.float32], clients: int, requests: int) -> dict[str, float]:
    """`requests` requests from `clients` closed-loop clients: req/s and latency percentiles."""
    latencies: list[float] = []
    lock = threading.Lock()
    counts = [requests // clients + (k < requests % clients) for k in range(clients)]

    def client(n: int) -> None:
        c = grpc.InferenceServerClient(url)
        feed = grpc.InferInput("x", list(x.shape), "FP32")
        feed.set_data_from_numpy(x)
        mine = []
        for _ in range(n):
            start = time.perf_counter()
            c.infer(model, [feed], client_timeout=120)
            mine.append(time.perf_counter() - start)
        c.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in counts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=100)
    return {
        "req_per_s": len(latencies) / wall,
        "p50_ms": q[49] * 1e3,
        "p99_ms": q[98] * 1e3,
        "requests": len(latencies),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=224, help="image height and width")
    parser.add_argument("--requests", type=int, default=96, help="requests per model and concurrency")
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    s = args.size
    spec = trt_lower.TensorSpec((1, 3, s, s), (1, 3, s, s), (MAX_BATCH, 3, s, s))
    lowered = trt_lower.lower_to_trt(model, (spec,))
    eager = trt_lower.lower_to_trt(model, (spec,), min_block_size=10**9)
    assert len(lowered.report.engines) == 1 and not eager.report.engines
    x = torch.randn(1, 3, s, s)
    with torch.inference_mode():
        want = model(x)
        for variant in (lowered, eager):
            print(f"max |diff| vs nn.Module: {(variant(x) - want).abs().max().item():.1e}")

    results: dict[str, dict[int, dict[str, float]]] = {"lowered": {}, "eager": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, variant in (("lowered", lowered), ("eager", eager)):
            export_model_repository(variant, Path(tmp) / "repo", name, max_batch_size=MAX_BATCH, platform="python")
        http_port, grpc_port, metrics_port = free_ports(3)
        with (
            open(Path(tmp) / "server.log", "wb") as log,
            TritonServer(
                Path(tmp) / "repo",
                http_port=http_port,
                grpc_port=grpc_port,
                metrics_port=metrics_port,
                log=log,
                ready_timeout=300,
            ) as server,
        ):
            image = x.numpy()
            for name in results:
                run_level(server.grpc_url, name, image, 1, args.warmup)
            for clients in (1, 4, 8):
                # Alternate which model goes first, so a change of machine load reaches both.
                order = list(results) if clients != 4 else list(reversed(results))
                for name in order:
                    results[name][clients] = run_level(server.grpc_url, name, image, clients, args.requests)

    print(
        f"\nresnet18 1x3x{s}x{s} through Triton 2.51 (python backend, dynamic batching, max batch {MAX_BATCH}), "
        f"{args.requests} requests per cell; verified on CPU via ONNX Runtime; load average {os.getloadavg()[0]:.1f}"
    )
    print("| clients | eager req/s | lowered req/s | speed-up | eager p50 / p99 ms | lowered p50 / p99 ms |")
    print("|---|---|---|---|---|---|")
    for clients in (1, 4, 8):
        e, lo = results["eager"][clients], results["lowered"][clients]
        print(
            f"| {clients} | {e['req_per_s']:.1f} | {lo['req_per_s']:.1f} | {lo['req_per_s'] / e['req_per_s']:.2f}x | "
            f"{e['p50_ms']:.1f} / {e['p99_ms']:.1f} | {lo['p50_ms']:.1f} / {lo['p99_ms']:.1f} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "size": s,
                    "requests": args.requests,
                    "python": sys.version,
                    "torch": torch.__version__,
                    "results": results,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
