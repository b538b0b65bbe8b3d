"""jag.utils: torch.utils's names; jag.utils.data loads ragged data in batches."""
from . import data  # noqa: F401

__all__ = ["data"]
