"""The `trt-lower` command: demo, lower/info/run of saved files (artifact.py), bench (bench.py),
repro, export-triton and serve (commands.py parses and dispatches)."""
from trt_lower.cli.commands import main

__all__ = ["main"]
