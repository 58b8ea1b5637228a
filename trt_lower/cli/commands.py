"""`trt-lower`: the command line's parser, built from COMMANDS, and `main`.

Only the chosen command's module is imported, to define its options: `trt-lower --help`,
`--version` and `keygen` import no torch, onnx or onnxruntime.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Iterable, Sequence

from trt_lower.cli import output
from trt_lower.cli.dispatch import Parser, run_command
from trt_lower.values.versions import own_version

# Every command: what `trt-lower --help` says of it, and `module:function`, the function that
# gives its parser the command's options and handler (`parser.set_defaults(command_fn=...)`),
# imported only when the command is chosen. A new command is one line here.
COMMANDS = {
    "demo": ("lower a model and compare it with eager PyTorch", "trt_lower.cli.demo:add_arguments"),
    "lower": (
        "lower a model and save it as one file (load it with trt_lower.load)",
        "trt_lower.cli.artifact:add_lower_arguments",
    ),
    "info": (
        "show an artifact's versions, inputs, engines, TensorRT plans and report",
        "trt_lower.cli.artifact:add_info_arguments",
    ),
    "run": (
        "load an artifact, run it on random inputs of its shapes, print latency",
        "trt_lower.cli.artifact:add_run_arguments",
    ),
    "bench": (
        "benchmark a lowered model against eager PyTorch (and torch.compile)",
        "trt_lower.cli.bench:add_arguments",
    ),
    "verify": (
        "check a saved model against the eager outputs saved with it (an upgrade gate)",
        "trt_lower.cli.verify:add_arguments",
    ),
    "profile": (
        "time a saved model per engine layer and eager node, with its source lines",
        "trt_lower.cli.profile:add_arguments",
    ),
    "repro": ("write one engine's ONNX, inputs and eager outputs for polygraphy", "trt_lower.cli.repro:add_arguments"),
    "keygen": (
        "make an Ed25519 key pair for signing artifacts: NAME.pem and NAME.pub.pem",
        "trt_lower.cli.signing:add_keygen_arguments",
    ),
    "sign": ("sign a saved artifact (load it with --trusted-key)", "trt_lower.cli.signing:add_sign_arguments"),
    "triton": (
        "write a saved model (.trtl) into a Triton model repository",
        "trt_lower.cli.serving:add_triton_arguments",
    ),
    "serve": ("run Triton Inference Server on a model repository", "trt_lower.cli.serving:add_serve_arguments"),
}

DESCRIPTION = (
    "Lower PyTorch models to TensorRT engines (ONNX Runtime where no GPU is present), check and benchmark them "
    "against eager, save them and serve them with Triton. `trt-lower demo` lowers a real model and shows report, "
    "accuracy and speed against eager. A failure ends in one line, `trt-lower COMMAND: ErrorType: message`, and "
    "exit status 1."
)
_DEBUG_HELP = "show the traceback of a failure, and the log of torch and its compilers"


def _definer(name: str) -> Callable[[argparse.ArgumentParser], None]:
    module, _, function = COMMANDS[name][1].partition(":")
    define: Callable[[argparse.ArgumentParser], None] = getattr(importlib.import_module(module), function)
    return define


def parser(defined: Iterable[str] = COMMANDS) -> Parser:
    """trt-lower's parser; the commands in `defined` get their options (the others are listed,
    and refused with a usage error should they be parsed)."""
    top = Parser(prog="trt-lower", description=DESCRIPTION)
    top.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    top.add_argument("--version", action="version", version=f"trt-lower {own_version()}")
    sub = top.add_subparsers(dest="command", required=True, help="`trt-lower COMMAND --help` lists its options")
    for name in COMMANDS:
        p = sub.add_parser(name, help=COMMANDS[name][0], description=COMMANDS[name][0])
        if name in defined:
            _definer(name)(p)
            # `trt-lower COMMAND ... --debug` too, for every command
            p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    return top


def _command(argv: Sequence[str]) -> list[str]:
    """The command `argv` names: its first word that is not an option (trt-lower's own options
    take no value)."""
    return [word for word in argv if not word.startswith("-")][:1]


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(_command(argv)).parse_args(argv)
    output.configure_logs(args.debug)
    return run_command(args.command, args.command_fn, args, args.debug)


if __name__ == "__main__":
    raise SystemExit(main())
