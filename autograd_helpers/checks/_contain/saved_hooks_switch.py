"""A torch setting beyond the shared snapshot that chapter 02's learner code could leave changed.

Used by :mod:`autograd_helpers.checks._core.problems` around each call into learner code. The
learner-code runner puts back and names what the shared snapshot knows
(:class:`~autograd_helpers._common.globals.GlobalState`: grad and anomaly mode, the default
dtype, threads, print options, flushing denormals, matmul precision, deterministic
algorithms, warnings filters, the random states), and
:class:`~.global_calls.GlobalCalls` what it cannot see (a reseed, random numbers drawn).
One switch neither covers: saved-tensor hooks disabled
(``torch._C._autograd._saved_tensors_hooks_disable``, which makes every later
``saved_tensors_hooks`` block raise). :class:`Settings` says it in plain words and puts it
back; should the shared snapshot come to cover it, the runner puts it back first and
nothing is said twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Settings"]

_AUTOGRAD: Any = torch._C._autograd  # private switches, not in its stubs


@dataclass(frozen=True)
class Settings:
    """The settings, as found: :meth:`take`, then :meth:`changes` and :meth:`restore`.

    Example::

        >>> before = Settings.take()
        >>> torch._C._autograd._saved_tensors_hooks_disable("no")
        >>> [c.split(" (")[0] for c in before.changes()]
        ['it left saved-tensor hooks disabled']
        >>> before.restore()
        >>> torch._C._autograd._saved_tensors_hooks_is_enabled()
        True
    """

    saved_hooks_enabled: bool
    saved_hooks_message: str | None

    @classmethod
    def take(cls) -> Settings:
        return cls(
            saved_hooks_enabled=_AUTOGRAD._saved_tensors_hooks_is_enabled(),
            saved_hooks_message=_AUTOGRAD._saved_tensors_hooks_get_disabled_error_message(),
        )

    def changes(self) -> list[str]:
        """What differs now, one sentence each, saying how to avoid it."""
        now = Settings.take()
        if now.saved_hooks_enabled == self.saved_hooks_enabled:
            return []
        state = "enabled" if now.saved_hooks_enabled else "disabled"
        return [
            f"it left saved-tensor hooks {state} "
            "(`torch._C._autograd._saved_tensors_hooks_disable` is a private switch for the "
            "whole process: every later `saved_tensors_hooks` block raises): leave it alone"
        ]

    def restore(self) -> None:
        """Put the switch back."""
        if self.saved_hooks_enabled:
            _AUTOGRAD._saved_tensors_hooks_enable()
        else:
            _AUTOGRAD._saved_tensors_hooks_disable(self.saved_hooks_message or "")
