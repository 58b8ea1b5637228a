"""Generation with causal LMs: `lower_causal_lm(model, max_batch=..., max_length=...)` returns a
module whose `.generate()` is transformers' own, every forward a lowered step with its key/value
cache in preallocated buffers."""

from trt_lower.llm.generation import GenerationLimitError as GenerationLimitError
from trt_lower.llm.generation import LoweredCausalLM as LoweredCausalLM
from trt_lower.llm.lower import lower_causal_lm as lower_causal_lm
