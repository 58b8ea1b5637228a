"""Accuracy debugging: where a lowered model departs from eager PyTorch, and what to keep float32.

In: the model, its lowered module and inputs. Out: per-output errors (accuracy.py:
check_accuracy, compare.py), the first diverging node (divergence.py, by replaying engines on
eager values: replay.py), the nodes to keep float32 under fp16 (fp16.py), each quantize node's
int8 codes with its layer fed eager inputs (quantized.py) and one engine as a stand-alone case for
polygraphy and trtexec (repro.py).
"""

from trt_lower.debug.divergence import Divergence, NodeError, first_divergence
from trt_lower.debug.fp16 import fp16_sensitive
from trt_lower.debug.quantized import LayerCodes, quantized_layers

__all__ = ["Divergence", "LayerCodes", "NodeError", "first_divergence", "fp16_sensitive", "quantized_layers"]
