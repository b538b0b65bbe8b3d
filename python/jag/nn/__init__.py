"""jag.nn: torch.nn's names over jag: Module, Parameter, the layers
(Linear, Embedding, LayerNorm, RMSNorm, Dropout, GELU, ReLU, SiLU,
LeakyReLU, ELU, SELU, Softplus, Hardtanh, Hardswish, Hardsigmoid, Mish,
LogSigmoid,
Sequential, ModuleList, ModuleDict, MultiheadAttention,
TransformerEncoderLayer, TransformerEncoder), init, utils (clip_grad_norm_) and the
functional API (jag.nn.functional)."""
from . import functional  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .module import Module  # noqa: F401
from . import init  # noqa: F401
from .modules import (Dropout, Embedding, GELU, Identity, LayerNorm, Linear, ModuleDict, ModuleList,  # noqa: F401
                      ReLU, RMSNorm, Sequential, SiLU)
from .modules import (ELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, SELU,  # noqa: F401
                      Softplus)
from . import parallel  # noqa: F401,E402
from . import utils  # noqa: F401
from .transformer import (EmbeddingBag, MultiheadAttention, TransformerEncoder,  # noqa: F401,E402
                          TransformerEncoderLayer)
