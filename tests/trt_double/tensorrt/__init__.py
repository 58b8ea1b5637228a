"""`import tensorrt` lands here when tests/trt_double is on sys.path: the module replaces itself
with the double, so every importer shares one module object (and one version setting)."""

import sys

from trt_double import double

sys.modules[__name__] = double
