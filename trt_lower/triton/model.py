"""Triton python-backend model written by trt_lower (trt_lower.triton.export_model_repository).

Loads the trt_lower artifact beside this file and runs it on each batch of requests (a causal
LM, config parameter `kind` "causal_lm": one generate() call per request); tensors pass between
Triton and torch through DLPack, without copies. The `python_path` parameter of
config.pbtxt names the Python environment that has trt_lower: the backend's stub process does
not inherit PYTHONPATH.
"""

import json
import os
import site
import sys
from typing import Any

# Exists only inside Triton's python backend.
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config["parameters"].items()}
        for path in reversed(params["python_path"].split(os.pathsep)):
            if path not in sys.path:
                sys.path.insert(0, path)
            site.addsitedir(path)  # its .pth files, e.g. editable installs
        from torch.utils.dlpack import from_dlpack

        from trt_lower.deploy.allocations import DEFAULT_MAX_EAGER_ALLOCATION
        from trt_lower.triton.backend import INPUT_ERRORS, Runner
        from trt_lower.triton.generation import KIND, GenerationRunner

        self.from_dlpack = from_dlpack
        self.input_errors = INPUT_ERRORS
        gpu = args["model_instance_kind"] == "GPU"
        artifact = os.path.join(args["model_repository"], args["model_version"], params["artifact"])
        device = f"cuda:{args['model_instance_device_id']}" if gpu else "cpu"
        # export_model_repository(..., max_eager_allocation=) writes it; else trt_lower.load's default.
        budget = int(params.get("max_eager_allocation", DEFAULT_MAX_EAGER_ALLOCATION))
        self.runner: Runner | GenerationRunner
        if params.get("kind") == KIND:
            self.runner = GenerationRunner.from_artifact(artifact, device, budget)
        else:
            self.runner = Runner.from_artifact(
                artifact,
                inputs=[t["name"] for t in config["input"]],
                outputs=[t["name"] for t in config["output"]],
                device=device,
                batching=config.get("max_batch_size", 0) > 0,
                max_eager_allocation=budget,
            )

    def execute(self, requests: list[Any]) -> list[Any]:
        names = self.runner.inputs
        # An optional input the request leaves out is None, and missing from its feed.
        given = [{n: pb_utils.get_input_tensor_by_name(r, n) for n in names} for r in requests]
        feeds = [{n: self.from_dlpack(t.to_dlpack()) for n, t in g.items() if t is not None} for g in given]
        responses = []
        for reply in self.runner.run(feeds):
            if isinstance(reply, Exception):
                code = (
                    pb_utils.TritonError.INVALID_ARG
                    if isinstance(reply, self.input_errors)
                    else pb_utils.TritonError.INTERNAL
                )
                error = pb_utils.TritonError(f"{type(reply).__name__}: {reply}", code)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                tensors = [pb_utils.Tensor.from_dlpack(n, t.__dlpack__()) for n, t in reply.items()]
                responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
