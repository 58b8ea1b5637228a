"""How every `trt-lower` command ends on a failure: one line, `trt-lower COMMAND: ErrorType:
message`, and exit status 1, whatever the error (a bad option, a refused file, an unexpected
exception deep inside); `trt-lower --debug COMMAND ...` lets the traceback through instead. A
closed pipe on stdout ends a command quietly, with status 1.
Commands report bad input by raising (UsageError for options that do not fit together); the
dispatcher, not each command, turns what they raise into that line."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn

from converters.core.errors import TrtLowerError
from trt_lower.cli.output import held_stderr, quiet_stdout


class UsageError(TrtLowerError, ValueError):
    """Options or arguments that do not fit together (argparse's own checks raise it too)."""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors end like every other failure (its sub-parsers are of this
    class too): one line naming the command, exit status 1."""

    def error(self, message: str) -> NoReturn:
        raise SystemExit(f"{self.prog}: {UsageError.__name__}: {message} (see {self.prog} --help)")


def one_line(error: BaseException) -> str:
    """`ErrorType: message`, the message's lines joined."""
    message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def run_command(
    command: str, function: Callable[[argparse.Namespace], int], args: argparse.Namespace, debug: bool
) -> int:
    """`function(args)`'s exit status; a failure as one line (SystemExit), or raised as it is
    when `debug`. What else the command writes to stderr is held meanwhile (output.held_stderr);
    a reader that stops reading (`| head -1`) ends it quietly."""
    try:
        with held_stderr(debug):
            status = int(function(args))
            sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's flush at exit
        return status
    except BrokenPipeError:
        quiet_stdout()
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"trt-lower {command}: interrupted", file=sys.stderr)
        return 130  # the shell's status for a command ended by SIGINT
    except Exception as error:  # noqa: BLE001 (the promise: no traceback, whatever went wrong)
        if debug:
            raise
        raise SystemExit(f"trt-lower {command}: {one_line(error)}") from error
