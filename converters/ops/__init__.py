"""The op families: one short `@converter` function per ATen overload.

Importing this package registers every family.
"""

from converters.ops import (  # noqa: F401  (imported for their registrations)
    activation,
    attention,
    bitwise,
    collectives,
    control_flow,
    conv,
    creation,
    elementwise,
    fp8,
    gather,
    grouped_mm,
    histogram,
    index,
    int4,
    layout,
    linalg,
    math_functions,
    matmul,
    nonzero,
    normalization,
    padding,
    pooling,
    prims,
    quantize,
    reduce,
    resize,
    rotary,
    sampling,
    scatter,
    shape,
    sort,
    symbolic,
)
