"""The CLI's surface: `--help`, `--version`, `keygen` and `import trt_lower` load no torch, onnx or
onnxruntime; every option says what it is for; one name per concept across commands, the former
spellings still accepted with a warning."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trt_lower.cli import commands

HEAVY = ("torch", "onnx", "onnxruntime")


def _imported(code: str) -> list[str]:
    """Which of HEAVY a fresh interpreter has imported after running `code` (a failure fails)."""
    probe = f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return list(eval(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["keygen", "{tmp}/release"], *([name, "--help"] for name in commands.COMMANDS)],
    ids=" ".join,
)
def test_the_light_commands_import_no_torch(argv: list[str], tmp_path: Path) -> None:
    """Every command module imported torch (and onnx, onnxruntime) at its top to build the parser:
    3-6 s before `--help` printed anything. And every command's --help: its options' choices
    (demo models, settings, Triton platforms) came from modules importing torch or onnx."""
    argv = [a.format(tmp=tmp_path) for a in argv]
    code = f"""
        import contextlib
        from trt_lower.cli import main
        with contextlib.suppress(SystemExit):
            main({argv!r})
    """
    assert _imported(code) == []
    if argv[0] == "keygen" and argv[1] != "--help":
        assert (tmp_path / "release.pem").is_file() and (tmp_path / "release.pub.pem").is_file()


def test_import_trt_lower_from_a_source_tree_imports_no_torch() -> None:
    """Without the `torch_dynamo_backends` entry point (a source tree on sys.path), `import
    trt_lower` registered the torch.compile backend, importing torch._dynamo, onnx and onnxruntime;
    imported after torch, it still registers it."""
    no_entry_point = textwrap.dedent("""
        import importlib.metadata as metadata
        found = metadata.entry_points
        metadata.entry_points = lambda **kw: (
            metadata.EntryPoints(()) if kw.get("group") == "torch_dynamo_backends" else found(**kw)
        )
    """)
    assert _imported(no_entry_point + "import trt_lower") == []
    registered = "from torch._dynamo.backends.registry import lookup_backend\nprint(lookup_backend('trt_lower'))"
    assert "torch" in _imported(no_entry_point + "import torch\nimport trt_lower\n" + registered)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_option_of_every_command_has_help() -> None:
    top = commands.parser()
    missing = [
        f"{name} {'/'.join(a.option_strings) or a.dest}"
        for name, command in {"trt-lower": top, **_subparsers(top)}.items()
        for a in command._actions
        if not a.help
    ]
    assert missing == []


def test_an_option_without_help_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk above sees the options each command's module defines."""

    def bare(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bare")

    define = commands._definer
    monkeypatch.setitem(commands.COMMANDS, "bare", ("a command", "tests.test_cli_surface:_unused"))
    monkeypatch.setattr(commands, "_definer", lambda name: bare if name == "bare" else define(name))
    with pytest.raises(AssertionError, match=r"\['bare --bare'\]"):
        test_every_option_of_every_command_has_help()


@pytest.mark.parametrize(
    ("argv", "old", "dest", "value"),
    [
        (["run", "{file}", "--iters", "2"], "--iters", "iterations", 2),
        (["demo", "--iters", "2"], "--iters", "iterations", 2),
        (["bench", "{file}", "--batch", "1,8"], "--batch", "batch_sizes", [1, 8]),
        (["repro", "{file}", "--out", "{tmp}/repro"], "--out", "output", "{tmp}/repro"),
        (["sign", "{file}", "--key", "{tmp}/m.trtl"], "--key", "sign_with", "{tmp}/m.trtl"),
        (["lower", "m:f", "-o", "{tmp}/m.trtl", "--workspace", "1024"], "--workspace", "workspace_bytes", 1024),
        (["triton", "{file}", "--repo", "r", "--name", "n", "--max-batch", "8"], "--max-batch", "max_batch_size", 8),
        (["serve", "{tmp}", "--timeout", "5"], "--timeout", "ready_timeout", 5.0),
    ],
)
def test_former_spellings_still_work_with_a_warning(
    argv: list[str], old: str, dest: str, value: object, tmp_path: Path
) -> None:
    file = tmp_path / "m.trtl"
    file.write_bytes(b"")
    argv = [a.format(file=file, tmp=tmp_path) for a in argv]
    with pytest.warns(FutureWarning, match=f"{old} is deprecated .* use "):
        args = commands.parser([argv[0]]).parse_args(argv)
    assert getattr(args, dest) == (value.format(tmp=tmp_path) if isinstance(value, str) else value)
    help_text = _subparsers(commands.parser([argv[0]]))[argv[0]].format_help()
    assert old + " " not in help_text  # hidden: --help shows the one name


def test_one_name_per_concept() -> None:
    """`--iters` and `--iterations`, `--out` and `-o/--output`, `--batch` a size and a list, `sign
    --key` and `lower --sign-with` (the private key a file is signed with)."""
    options: dict[str, set[str]] = {}
    for name, command in _subparsers(commands.parser()).items():
        for a in command._actions:
            if a.option_strings and a.help != argparse.SUPPRESS:
                options.setdefault(a.dest, set()).add("/".join(a.option_strings))
    spelled_twice = {dest: spellings for dest, spellings in options.items() if len(spellings) > 1}
    assert spelled_twice == {}
    assert {"iters", "out", "key"}.isdisjoint(options) and options["batch"] == {"--batch"}


# They read a file without loading a model from it: `info` shows whether its signature is valid
# (not whom to trust), `sign` is the act of trusting it.
NOT_LOADING = {"info", "sign"}


def test_every_command_loading_a_saved_model_takes_trusted_key() -> None:
    """`triton FILE` loaded the file with $TRT_LOWER_TRUSTED_KEYS only."""
    reading, trusting = set(), set()
    for name, command in _subparsers(commands.parser()).items():
        reading |= {name for a in command._actions if a.dest == "file" and a.type is not None}
        trusting |= {name for a in command._actions if a.option_strings == ["--trusted-key"]}
    assert reading - NOT_LOADING == trusting


def test_every_command_taking_inputs_spells_them_alike() -> None:
    """One --input: the same syntax (SHAPE[:DTYPE], once per forward argument) and parser."""
    spellings = {
        (a.metavar, type(a).__name__, a.help.split(" (default")[0] if a.help else "")
        for command in _subparsers(commands.parser()).values()
        for a in command._actions
        if a.dest == "input"
    }
    assert len(spellings) == 1, spellings
