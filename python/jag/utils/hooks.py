"""jag.utils.hooks: the handle of a registered hook (torch.utils.hooks)."""
from __future__ import annotations

import typing as _typing


class RemovableHandle:
    """A handle returned by ``register_*_hook``: ``remove()`` unregisters the
    hook (again: nothing happens). Also a context manager that removes the
    hook on exit, as torch's."""

    def __init__(self, remove_fn: _typing.Callable[[int], None], hook_id: int) -> None:
        self._remove_fn: _typing.Optional[_typing.Callable[[int], None]] = remove_fn
        self.id = hook_id

    def remove(self) -> None:
        """Unregister the hook; the hook does not run again."""
        if self._remove_fn is not None:
            fn, self._remove_fn = self._remove_fn, None
            fn(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
