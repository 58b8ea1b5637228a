"""What trt_lower writes and prints from names it does not choose: save and `sign -o` replace only
regular files (a FIFO or a device at the path is refused, untouched), and `trt-lower info`
escapes every string it prints from a file (a newline or terminal escape there cannot print a
line of its own)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch
from artifact_tamper import tamper

import trt_lower
from trt_lower.cli import commands as cli
from trt_lower.deploy import signing

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


@pytest.fixture(scope="module")
def lowered() -> trt_lower.LoweredModule:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    return trt_lower.lower_to_trt(model, (torch.randn(2, 4),), backend="onnxruntime")


def specials(tmp_path: Path) -> list[Path]:
    """A FIFO, and a link to /dev/null (what `-o /dev/null` is as root, without being root)."""
    fifo, null = tmp_path / "fifo.trtl", tmp_path / "null.trtl"
    os.mkfifo(fifo)
    null.symlink_to(os.devnull)
    return [fifo, null]


def unchanged(path: Path) -> bool:
    mode = path.stat().st_mode
    return stat.S_ISFIFO(mode) if path.name == "fifo.trtl" else path.is_symlink() and stat.S_ISCHR(mode)


def test_save_replaces_a_regular_file_and_nothing_else(lowered: trt_lower.LoweredModule, tmp_path: Path) -> None:
    for special in specials(tmp_path):
        with pytest.raises(FileExistsError, match=f"{special} exists and is not a regular file"):
            trt_lower.save(lowered, special)
        assert unchanged(special)
    regular = tmp_path / "m.trtl"
    regular.write_bytes(b"an older file")
    trt_lower.save(lowered, regular)
    x = torch.randn(2, 4)
    torch.testing.assert_close(trt_lower.load(regular, backend="onnxruntime")(x), lowered(x))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.trtl", "m.trtl", "null.trtl"]  # no temporaries


def test_sign_output_replaces_a_regular_file_and_nothing_else(lowered: trt_lower.LoweredModule, tmp_path: Path) -> None:
    source, key = tmp_path / "m.trtl", tmp_path / "k.pem"
    trt_lower.save(lowered, source)
    assert cli.main(["keygen", str(tmp_path / "k")]) == 0
    for special in specials(tmp_path):
        with pytest.raises(SystemExit, match="trt-lower sign: FileExistsError: .* is not a regular file"):
            cli.main(["sign", str(source), "--sign-with", str(key), "-o", str(special)])
        assert unchanged(special)
    assert cli.main(["sign", str(source), "--sign-with", str(key), "-o", str(source)]) == 0
    with open(source, "rb") as file:
        assert "(valid)" in signing.describe(file)


FAKE = "\n  signature: Ed25519 key 0000 (valid)\x1b[8m"  # a line of its own, then hidden text


def test_info_escapes_what_the_file_says(
    lowered: trt_lower.LoweredModule, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Strings from the manifest's header, its inputs and its report, and the file's own name."""

    def lie(manifest: dict[str, object], members: dict[str, bytes]) -> None:
        manifest["written_by"] = {"trt_lower" + FAKE: "1.0\u202e"}
        manifest["inputs"][0]["source"] += FAKE  # type: ignore[index]
        manifest["report"]["engines"][0]["name"] += FAKE  # type: ignore[index]

    trt_lower.save(lowered, tmp_path / "m.trtl")
    forged = tamper(tmp_path / "m.trtl", tmp_path / "x\x1b[2K.trtl", lie)
    assert cli.main(["info", str(forged)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert [line for line in out.splitlines() if line.startswith("  signature:")] == ["  signature: none (unsigned)"]
    assert "trt_lower\\n  signature: Ed25519 key 0000 (valid)\\x1b[8m 1.0\\u202e" in out
    assert "x\\x1b[2K.trtl: trt_lower artifact" in out
