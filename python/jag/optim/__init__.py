"""jag.optim: torch.optim's optimizers (SGD, Adam, AdamW) over jag's fused
C steps, and learning-rate schedulers (jag.optim.lr_scheduler)."""
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from . import lr_scheduler  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
