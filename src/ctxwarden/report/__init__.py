"""Report: the /context report, its renderings and forecast, and the usage plot.

The top of the library below the session: it reads what every layer left in a thread
(the stamps, the fold and clearing state, the trace) and describes it, so it may import
any of them, and none of them imports it.
"""

from ctxwarden.report.build import acontext_report, build_report, context_report
from ctxwarden.report.context import ContextReport
from ctxwarden.report.figures import CATEGORIES
from ctxwarden.report.plot import usage_plot

__all__ = ["CATEGORIES", "ContextReport", "acontext_report", "build_report", "context_report", "usage_plot"]
