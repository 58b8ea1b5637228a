"""The `trt-lower` command: demo, lower/info/run of saved files (artifact.py), bench (bench.py),
repro (repro.py), keygen and sign (signing.py), triton and serve (commands.py parses and dispatches).

In: the command line. Out: what each command prints and writes (reports, benchmark summaries,
artifacts, model repositories), and its exit status.
"""

from trt_lower.cli.commands import main

__all__ = ["main"]
