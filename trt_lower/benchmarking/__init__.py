"""The lowered module against eager PyTorch: timing, per-engine breakdown, summary and plot.

In: a model, its lowered module(s) and inputs. Out: a BenchmarkResult (measure.py) with host or
CUDA timings (timing.py), the split of a call into engines and overhead (breakdown.py), the
machine it ran on (machine.py), a text summary (summary.py) and a plot (plot.py). models.py
builds the demo models by name (the demo, `trt-lower bench`, repro).
Entry: `trt_lower.benchmarking.measure.benchmark` (also `trt_lower.benchmark`).
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
