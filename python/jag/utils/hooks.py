"""jag.utils.hooks: the handle of a registered hook (torch.utils.hooks)."""
from __future__ import annotations

import typing as _typing


class RemovableHandle:
    """A handle returned by ``register_*_hook``: ``remove()`` unregisters the
    hook (again: nothing happens). Also a context manager that removes the
    hook on exit, as torch's.

    Example::

        >>> w = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> seen = []
        >>> with w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist())):
        ...     (w * 3).sum().backward()  # the hook runs once w.grad is final
        >>> (w * 3).sum().backward()  # removed on leaving the with block
        >>> seen
        [[3.0, 3.0]]
    """

    def __init__(self, remove_fn: _typing.Callable[[int], None], hook_id: int) -> None:
        self._remove_fn: _typing.Optional[_typing.Callable[[int], None]] = remove_fn
        self.id = hook_id

    def remove(self) -> None:
        """Unregister the hook; the hook does not run again.

        Example::

            >>> w = jag.tensor([1.0], requires_grad=True)
            >>> calls = []
            >>> handle = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
            >>> w.sum().backward()
            >>> handle.remove()
            >>> w.sum().backward()
            >>> len(calls)
            1
        """
        if self._remove_fn is not None:
            fn, self._remove_fn = self._remove_fn, None
            fn(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
