"""`rlm.logger`: the trajectory logger and the console printer."""

from rlmx.compat.rlms.logger.rlm_logger import RLMLogger
from rlmx.compat.rlms.logger.verbose import VerbosePrinter

__all__ = ["RLMLogger", "VerbosePrinter"]
