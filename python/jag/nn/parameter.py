"""jag.nn.Parameter: a tensor that a Module registers as a parameter."""
import jag as _jag
from jag import _C


class Parameter(_jag.Tensor):
    """A leaf tensor that requires grad (by default) and that a Module
    assigned it as an attribute registers in its parameters, as torch's
    nn.Parameter. ``Parameter(t)`` shares t's data (a detached alias:
    writes to one show in the other); ops on a Parameter give plain
    jag.Tensors.

    Example::

        >>> p = jag.nn.Parameter(jag.tensor([1.0, 2.0]))
        >>> p
        Parameter containing:
        tensor([1.0000, 2.0000], dtype=float32, size=[2])
        >>> p.requires_grad, isinstance(p, jag.Tensor)
        (True, True)
        >>> m = jag.nn.Module()
        >>> m.scale = p  # registered as a parameter
        >>> [name for name, _ in m.named_parameters()]
        ['scale']
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _jag.empty(0)
        if not isinstance(data, _jag.Tensor):
            raise TypeError("Parameter: data must be a jag.Tensor, got %s" % type(data).__name__)
        return _C._as_parameter(cls, data, bool(requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (self.detach(), self.requires_grad))
