"""The `trt-lower` command: its parser and the list of commands (commands.py), one module per
family of commands: demo (demo.py), lower/info/run (artifact.py), bench (bench.py), verify
(verify.py), repro (repro.py), keygen and sign (signing.py), triton and serve (serving.py); how
every command ends (dispatch.py) and what it writes besides its output (output.py).

In: the command line. Out: what each command prints and writes (reports, benchmark summaries,
artifacts, model repositories), and its exit status.
"""

from trt_lower.cli.commands import main

__all__ = ["main"]
