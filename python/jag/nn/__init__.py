"""jag.nn: only the functional API so far (jag.nn.functional)."""
from . import functional  # noqa: F401
