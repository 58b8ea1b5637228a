"""The CLI: the demo prints the report, the accuracy and the latency comparison; every failure,
expected or not, is one line `trt-lower COMMAND: ErrorType: message` and exit status 1."""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from trt_lower.cli import commands as cli
from trt_lower.cli.dispatch import run_command


def test_demo_prints_report_accuracy_and_speed(capsys: pytest.CaptureFixture[str]) -> None:
    # The demo's MobileNetV3 has uncalibrated BatchNorm: outputs around 1e-9, so an absolute
    # tolerance of 1e-3 would pass zeros; compare relative to that scale instead.
    code = cli.main(
        [
            "demo",
            "--model",
            "mobilenet_v3_small",
            "--backend",
            "onnxruntime",
            "--iterations",
            "2",
            "--warmup",
            "1",
            "--rtol",
            "1e-3",
            "--atol",
            "1e-12",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "trt_lower report: backend=onnxruntime" in out
    assert "accuracy vs eager" in out and "PASS" in out
    assert "lowered (onnxruntime)" in out and "vs eager" in out and "p99" in out


def fails(argv: list[str], pattern: str) -> None:
    """`trt-lower ARGV` ends in one line matching `pattern` (SystemExit with a text: status 1)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    line = exited.value.code
    assert isinstance(line, str) and "\n" not in line, line
    assert re.fullmatch(pattern, line), line


def test_bad_input_is_one_line_naming_the_command_not_a_traceback(tmp_path: Path) -> None:
    missing = f"{tmp_path}/missing.trtl"
    fails(["info", missing], rf"trt-lower info: UsageError: argument file: {missing}: no such file \(see .*\)")
    fails(
        ["triton", missing, "--repo", f"{tmp_path}/repo", "--name", "m"],
        r"trt-lower triton: UsageError: .*no such file.*",
    )


def test_usage_errors_are_one_line_with_status_1_too() -> None:
    """argparse printed its usage and a second line, with status 2."""
    fails(["demo", "--model", "nope"], r"trt-lower demo: UsageError: argument --model: invalid choice: 'nope' .*")
    fails([], r"trt-lower: UsageError: the following arguments are required: command \(see trt-lower --help\)")
    for port in ("70000", "0", "-1", "http"):
        fails(
            ["serve", ".", "--http-port", port],
            rf"trt-lower serve: UsageError: argument --http-port: '{port}' is "
            r"not a port \(1\.\.65535\) .*",
        )


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    """An unknown factory module and a manifest nested past Python's recursion limit ended in
    tracebacks; --debug (before or after the command) lets the error through."""
    argv = ["lower", "no_such_module:make", "--input", "2x3", "-o", str(tmp_path / "m.trtl")]
    fails(argv, r"trt-lower lower: ModuleNotFoundError: No module named 'no_such_module'")
    for debug in (["--debug", *argv], [*argv, "--debug"]):
        with pytest.raises(ModuleNotFoundError):
            cli.main(debug)
    deep = tmp_path / "deep.trtl"
    with zipfile.ZipFile(deep, "w") as archive:
        archive.writestr("manifest.json", "[" * 100_000 + "]" * 100_000)
    fails(["info", str(deep)], r"trt-lower info: \w+Error: .*")


def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fails(
            ["serve", str(tmp_path), "--http-port", str(port)],
            rf"trt-lower serve: RuntimeError: cannot serve on 127\.0\.0\.1:{port}: .*another server there.*",
        )


def test_what_is_not_a_regular_file_is_named_as_such(tmp_path: Path) -> None:
    """A directory or a FIFO was reported as "no such file"; opening a FIFO would wait forever."""
    fifo = tmp_path / "fifo.trtl"
    os.mkfifo(fifo)
    fails(
        ["info", str(tmp_path)], rf"trt-lower info: UsageError: argument file: {tmp_path} is a directory, not a file .*"
    )
    fails(["run", str(fifo)], rf"trt-lower run: UsageError: argument file: {fifo} is a FIFO, not a file .*")
    fails(
        ["lower", "--model", "resnet18", "-o", str(tmp_path)],
        rf"trt-lower lower: UsageError: argument -o/--output: {tmp_path} is a directory, not a file .*",
    )


def test_lower_does_not_create_the_output_directory(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "dir" / "m.trtl"
    fails(
        ["lower", "--model", "resnet18", "-o", str(out)],
        rf"trt-lower lower: UsageError: argument -o/--output: {out}: the directory {out.parent} does not exist .*",
    )
    assert not (tmp_path / "no").exists()


def test_the_dispatcher_gives_any_command_the_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """What a command registered by anyone raises, Ctrl-C included."""

    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("a message\n  of two lines")

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit, match=r"^trt-lower sign: RuntimeError: a message; of two lines$"):
        run_command("sign", broken, argparse.Namespace(), debug=False)
    assert run_command("sign", interrupted, argparse.Namespace(), debug=False) == 130
    assert capsys.readouterr().err == "trt-lower sign: interrupted\n"


def test_the_command_exits_with_status_1_and_one_line_on_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trt_lower", "info", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr == f"trt-lower info: UsageError: argument file: {tmp_path} is a directory, not a file "
        "(see trt-lower info --help)\n"
    )


FAILING_MODEL = """
import torch


class DataDependent(torch.nn.Module):
    def forward(self, x):
        return x + 1 if x.sum() > 0 else x - 1  # torch.export cannot capture a branch on data


def make():
    return DataDependent()
"""


def test_a_failing_lower_through_the_console_script_is_one_line_and_finds_the_module_here(tmp_path: Path) -> None:
    """torch.export printed the partial graph and torch logged a warning (about 20 lines) before the
    one-line error; and the console script's sys.path, which starts with its own directory, did not
    find a MODULE in the current directory (ModuleNotFoundError)."""
    script = Path(sys.executable).parent / "trt-lower"
    if not script.is_file():
        pytest.skip("trt_lower is not installed here: no trt-lower console script")
    (tmp_path / "here_model.py").write_text(FAILING_MODEL)
    argv = [str(script), "lower", "here_model:make", "--input", "2x3", "--backend", "onnxruntime", "-o", "m.trtl"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("trt-lower lower: CaptureError: "), done.stderr
    debug = subprocess.run([*argv, "--debug"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "def forward" in debug.stderr and "Traceback" in debug.stderr  # --debug shows it all


def test_info_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`trt-lower info FILE | head -1`: the reader gone, the write failed with BrokenPipeError,
    reported as a failure (or at exit, "Exception ignored ... BrokenPipeError")."""
    import torch

    import trt_lower

    model = torch.nn.Linear(3, 2).eval()
    trt_lower.save(trt_lower.lower_to_trt(model, (torch.randn(2, 3),), backend="onnxruntime"), tmp_path / "m.trtl")
    command = [sys.executable, "-m", "trt_lower", "info", str(tmp_path / "m.trtl")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as info:
        assert info.stdout is not None and info.stderr is not None
        info.stdout.close()  # before it writes a line: every write it makes finds the pipe closed
        stderr = info.stderr.read()
        assert info.wait(timeout=120) == 1
    assert stderr == b""


def test_lower_signs_and_takes_a_verification_sample_and_run_trusts_only_given_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "linear_model.py").write_text("import torch\n\ndef make():\n    return torch.nn.Linear(3, 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("ours", "theirs"):
        assert cli.main(["keygen", str(tmp_path / name)]) == 0
    out = tmp_path / "m.trtl"
    lower = ["lower", "linear_model:make", "--input", "2x3", "--dynamic", "0.0=1..8", "--backend", "onnxruntime"]
    fails(
        [*lower, "--verify-input", "5x3", "--verify-input", "5x3", "-o", str(out)], r".*UsageError: --verify-input:.*"
    )
    fails([*lower[:4], "--verify-input", "5x3", "-o", str(out)], r".*UsageError: --verify-input is for --dynamic.*")
    signed = [*lower, "--verify-input", "7x3", "--sign-with", str(tmp_path / "ours.pem"), "-o", str(out)]
    assert cli.main(signed) == 0

    import trt_lower

    probe = trt_lower.load(out).probe
    assert probe is not None and [tuple(t.shape) for t in probe.inputs] == [(7, 3)]  # the sample, not --input's
    run = ["run", str(out), "--iterations", "1", "--warmup", "0", "--trusted-key"]
    assert cli.main([*run, str(tmp_path / "ours.pub.pem")]) == 0
    assert "signed with" in capsys.readouterr().out
    fails(
        [*run, str(tmp_path / "theirs.pub.pem")],
        r"trt-lower run: \w+: .*signed by key sha256:\w+, which is not trusted.*",
    )
    monkeypatch.setenv("TRT_LOWER_TRUSTED_KEYS", str(tmp_path / "theirs.pub.pem"))
    fails(["verify", str(out), "--trusted-key", str(tmp_path / "theirs.pub.pem")], r".*which is not trusted.*")
    assert cli.main(["verify", str(out), "--trusted-key", str(tmp_path / "ours.pub.pem")]) == 0


def test_what_a_command_writes_to_stderr_is_held_but_trt_lowers_progress_is_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """torch's logs and prints reach sys.stderr: shown after a command that succeeds, dropped after
    one that fails (its one line stands alone); trt_lower's own lines show as they come."""
    import logging

    from trt_lower.cli.output import configure_logs

    def command(fail: bool) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            logging.getLogger("trt_lower").info("building engine_0")
            print("a partial graph torch.export prints", file=sys.stderr)
            if fail:
                raise RuntimeError("capture failed")
            return 0

        return run

    configure_logs(debug=False)
    assert run_command("lower", command(fail=False), argparse.Namespace(), debug=False) == 0
    assert capsys.readouterr().err == "building engine_0\na partial graph torch.export prints\n"
    with pytest.raises(SystemExit, match="^trt-lower lower: RuntimeError: capture failed$"):
        run_command("lower", command(fail=True), argparse.Namespace(), debug=False)
    assert capsys.readouterr().err == "building engine_0\n"


def test_triton_exports_only_a_file_signed_by_a_key_given_with_trusted_key(tmp_path: Path) -> None:
    """`trt-lower triton` had no --trusted-key: it exported any file unless $TRT_LOWER_TRUSTED_KEYS was set."""
    import torch

    import trt_lower

    for name in ("ours", "theirs"):
        assert cli.main(["keygen", str(tmp_path / name)]) == 0
    lowered = trt_lower.lower_to_trt(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),), backend="onnxruntime")
    signed, unsigned, tampered = (tmp_path / f"{kind}.trtl" for kind in ("signed", "unsigned", "tampered"))
    trt_lower.save(lowered, signed, sign_with=tmp_path / "ours.pem")
    trt_lower.save(lowered, unsigned)
    data = bytearray(signed.read_bytes())
    data[len(data) // 2] ^= 1
    tampered.write_bytes(bytes(data))
    export = ["triton", "--repo", str(tmp_path / "repo"), "--platform", "python", "--trusted-key"]
    fails([*export, str(tmp_path / "ours.pub.pem"), str(unsigned), "--name", "u"], r".*unsigned\.trtl is not signed.*")
    fails([*export, str(tmp_path / "theirs.pub.pem"), str(signed), "--name", "s"], r".*which is not trusted.*")
    fails(
        [*export, str(tmp_path / "ours.pub.pem"), str(tampered), "--name", "t"],
        r"trt-lower triton: ArtifactError: .*tampered\.trtl.*",
    )
    assert not (tmp_path / "repo").exists()
    assert cli.main([*export, str(tmp_path / "ours.pub.pem"), str(signed), "--name", "s"]) == 0
    assert (tmp_path / "repo" / "s" / "config.pbtxt").is_file()


def test_sign_without_a_key_is_a_usage_error(tmp_path: Path) -> None:
    """--sign-with is not required by argparse (its former spelling --key may give it instead)."""
    (tmp_path / "m.trtl").write_bytes(b"")
    fails(["sign", str(tmp_path / "m.trtl")], r"trt-lower sign: UsageError: give the private key to sign with: .*")
