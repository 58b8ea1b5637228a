"""`trt_lower.build`, the stage's name before it became `trt_lower.engine`, still imports: it warns
once and hands out the very modules of trt_lower.engine. Run in a fresh interpreter, where nothing
has imported either name yet."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import trt_lower.build
    from trt_lower.build.cache import EngineCache
    import trt_lower.build.errors
    from trt_lower.build import backend
import trt_lower.engine.backend, trt_lower.engine.cache, trt_lower.engine.errors
try:
    import trt_lower.build.no_such_module
    missing = "imported"
except ModuleNotFoundError as error:
    missing = str(error)
print(json.dumps({
    "warnings": [f"{w.category.__name__}: {w.message} ({w.filename})" for w in caught],
    "same": [EngineCache is trt_lower.engine.cache.EngineCache,
             trt_lower.build.errors is trt_lower.engine.errors, backend is trt_lower.engine.backend],
    "spec": trt_lower.engine.cache.__spec__.name,
    "missing": missing,
}))
"""


def test_old_imports_warn_once_and_give_the_engine_modules() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert len(seen["warnings"]) == 1, seen["warnings"]
    assert seen["warnings"][0].startswith("DeprecationWarning: trt_lower.build is deprecated")
    assert "trt_lower.engine" in seen["warnings"][0]
    assert seen["warnings"][0].endswith("(<string>)")  # points at the importing code, not at importlib
    assert seen["same"] == [True, True, True]
    assert seen["spec"] == "trt_lower.engine.cache"
    assert seen["missing"] == "No module named 'trt_lower.build.no_such_module'"
