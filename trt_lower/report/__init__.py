"""What runs where, and why: the LoweringReport and the picture of the split.

In: the engines and fallbacks the stitch stage reports, the lowered FX graph. Out: the report
(report.py, entries.py), its graph as drawn (describe.py), the picture as DOT/SVG/PNG (draw.py)
or one HTML page (draw_html.py).
"""

from trt_lower.report.entries import EngineReport, Fallback, GraphNode, Repair
from trt_lower.report.report import LoweringReport

__all__ = ["EngineReport", "Fallback", "GraphNode", "LoweringReport", "Repair"]
