"""torch's process and thread settings that learner code could leave changed.

Used by the learner-code runner: each call into learner code runs between
:meth:`GlobalState.take` and :meth:`GlobalState.undo`, so that nothing it switches outlives
it (:meth:`~GlobalState.restore`), and :meth:`~GlobalState.changes` says in plain words what
it would have left changed (a checker's verdict of its own). The random states (torch's,
NumPy's global one, Python's ``random``) are only put back: using random numbers is no
mistake, but drawing them must not change what the notebook draws next (reseeding is judged
where the calls are seen, in ``checks.function._conduct_watch``).

A checker calls learner code dozens of times, so the snapshot is cheap: settings are read by
their getters, flushing of denormals from one multiplication of Python floats, NumPy's random
state put back only where it moved (:mod:`.random_states`); after the call the settings
that cost more than a getter are read once (:class:`Reading`) for both the verdict and the
restore, which sets back only what differs, torch's random state aside (always set: the
conduct watch sees the runner's restore by that call)."""

from __future__ import annotations

import random
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch._tensor_str import PRINT_OPTS

from autograd_helpers._common.process_settings import (
    PROCESS_WORDS,
    process_settings,
    restore_process,
)
from autograd_helpers._common.random_states import NumpyRandom, numpy_random_state

__all__ = ["GlobalState", "Reading", "flush_denormal"]


_SUBNORMAL, _ONE = 5e-324, 1.0  # variables, not literals: Python must not fold the product


def flush_denormal() -> bool:
    """Is ``torch.set_flush_denormal(True)`` on? (torch has no getter: a denormal flushed.)

    torch switches flushing in the calling thread's floating-point control register (SSE's
    MXCSR on x86, FPCR on AArch64: the only machines it supports it on), which Python's own
    float arithmetic obeys as well: a subnormal double times one reads as zero exactly when
    torch flushes, without a tensor operation.
    """
    return _SUBNORMAL * _ONE == 0.0


def _deterministic() -> tuple[bool, bool]:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )


@dataclass(frozen=True)
class Reading:
    """The settings that cost more than a getter to read, read once after a call: both
    :meth:`GlobalState.changes` and :meth:`GlobalState.restore` compare with it."""

    flush_denormal: bool
    process: dict[str, Any]

    @classmethod
    def now(cls) -> Reading:
        return cls(flush_denormal(), process_settings())


@dataclass(frozen=True)
class GlobalState:
    """Grad mode, anomaly mode, the default dtype, the thread count, print options, flushing
    of denormals, float32 matmul precision, the warnings filters, the random states, and
    process switches: cuDNN's and oneDNN's flags, the default device, the recursion limit,
    environment variables, ``torch.set_warn_always``, autograd's multithreading, NumPy's
    error handling and print options, ``logging.disable``.

    Example::

        >>> before = GlobalState.take()
        >>> _ = torch.set_grad_enabled(False)  # a learner's "optimisation", left on
        >>> [change.split(":")[0] for change in before.changes()]
        ['it left grad mode off (`torch.set_grad_enabled(False)` outlived the call)']
        >>> before.restore()
        >>> torch.is_grad_enabled()
        True
    """

    grad_enabled: bool
    anomaly_enabled: bool
    anomaly_check_nan: bool
    default_dtype: torch.dtype
    threads: int
    rng: torch.Tensor
    print_options: dict[str, Any]
    flush_denormal: bool
    matmul_precision: str
    deterministic: tuple[bool, bool]  # torch.use_deterministic_algorithms(mode, warn_only)
    warning_filters: list[Any]
    modules: int  # modules imported: one imported during the call may add warnings filters
    numpy_random: NumpyRandom | None  # None: NumPy never imported (nor imported here)
    python_rng: Any
    process: dict[str, Any]  # cuDNN, oneDNN, default device, recursion limit, environment...

    @classmethod
    def take(cls) -> GlobalState:
        return cls(
            grad_enabled=torch.is_grad_enabled(),
            anomaly_enabled=torch.is_anomaly_enabled(),
            anomaly_check_nan=torch.is_anomaly_check_nan_enabled(),
            default_dtype=torch.get_default_dtype(),
            threads=torch.get_num_threads(),
            rng=torch.get_rng_state(),
            print_options=dict(vars(PRINT_OPTS)),
            flush_denormal=flush_denormal(),
            matmul_precision=torch.get_float32_matmul_precision(),
            deterministic=_deterministic(),
            warning_filters=list(warnings.filters),
            modules=len(sys.modules),
            numpy_random=numpy_random_state(),
            python_rng=random.getstate(),
            process=process_settings(),
        )

    def undo(self) -> list[str]:
        """:meth:`changes`, then :meth:`restore`: what the call left changed, put back."""
        now = Reading.now()
        found = self.changes(now)
        self.restore(now)
        return found

    def changes(self, now: Reading | None = None) -> list[str]:
        """What differs now, one sentence each, saying how to avoid it."""
        found = []
        if torch.is_grad_enabled() != self.grad_enabled:
            found.append(
                "it left grad mode off (`torch.set_grad_enabled(False)` outlived the call): "
                "use `with torch.no_grad():`, which switches it back"
                if self.grad_enabled
                else "it left grad mode on: switch it inside a `with` block"
            )
        if torch.is_anomaly_enabled() != self.anomaly_enabled:
            state = "on" if torch.is_anomaly_enabled() else "off"
            found.append(
                f"it left anomaly mode {state} (it is global, for every thread): use "
                "`with torch.autograd.detect_anomaly():`, which switches it back"
            )
        if torch.get_default_dtype() != self.default_dtype:
            found.append(
                f"it left the default dtype at {torch.get_default_dtype()} instead of "
                f"{self.default_dtype}: give tensors a dtype (`dtype=...`, `.double()`) "
                "instead of `torch.set_default_dtype`"
            )
        if torch.get_num_threads() != self.threads:
            found.append(
                f"it left torch on {torch.get_num_threads()} threads instead of "
                f"{self.threads} (`torch.set_num_threads` is for the whole process): set it "
                "back in a `try`/`finally` around the code that needs it, or leave it alone"
            )
        found += self._display_changes(now or Reading.now())
        return found

    def _filters_changed(self) -> bool:
        """Did the call change the warnings filters (not a module it imported, as torch does)?"""
        return warnings.filters != self.warning_filters and len(sys.modules) == self.modules

    def _display_changes(self, now: Reading) -> list[str]:
        """Printing, denormals, matmul precision and warnings: settings for the whole process."""
        found = []
        if vars(PRINT_OPTS) != self.print_options:
            found.append(
                "it left torch's print options changed (`torch.set_printoptions` is for the "
                'whole notebook): format a value where you print it (`f"{x:.2f}"`)'
            )
        if now.flush_denormal != self.flush_denormal:
            state = "on" if not self.flush_denormal else "off"
            found.append(
                f"it left flushing of denormal numbers {state} (`torch.set_flush_denormal` "
                "changes every later float computation): leave it alone"
            )
        if torch.get_float32_matmul_precision() != self.matmul_precision:
            found.append(
                "it left the float32 matmul precision at "
                f"'{torch.get_float32_matmul_precision()}' instead of '{self.matmul_precision}' "
                "(`torch.set_float32_matmul_precision` is for the whole process): leave it alone"
            )
        if _deterministic() != self.deterministic:
            found.append(
                "it left deterministic algorithms "
                f"{'on' if _deterministic()[0] else 'off'} (`torch.use_deterministic_algorithms` "
                "is for the whole process): leave it alone"
            )
        if self._filters_changed():
            found.append(
                "it left Python's warnings filters changed (`warnings.simplefilter` or "
                "`filterwarnings` outlived the call, and hides warnings from the whole "
                "notebook): use `with warnings.catch_warnings():` around the code, which puts "
                "them back"
            )
        process = now.process
        if len(sys.modules) != self.modules:  # an import may set environment variables
            process = {**process, "environ": self.process["environ"]}
        found += [
            f"it left {words} (for the whole process): leave it alone, or set it back in a "
            "`try`/`finally`"
            for key, words in PROCESS_WORDS.items()
            if process[key] != self.process[key]
        ]
        return found

    def restore(self, now: Reading | None = None) -> None:
        """Put every setting back (grad mode for this thread), comparing with ``now``."""
        now = now or Reading.now()
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_anomaly_enabled(self.anomaly_enabled, self.anomaly_check_nan)
        if torch.get_default_dtype() != self.default_dtype:
            torch.set_default_dtype(self.default_dtype)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_rng_state(self.rng)  # always, before NumPy's: the conduct watch sees it
        if vars(PRINT_OPTS) != self.print_options:
            vars(PRINT_OPTS).update(self.print_options)
        if now.flush_denormal != self.flush_denormal:
            torch.set_flush_denormal(self.flush_denormal)
        if torch.get_float32_matmul_precision() != self.matmul_precision:
            torch.set_float32_matmul_precision(self.matmul_precision)
        if _deterministic() != self.deterministic:
            torch.use_deterministic_algorithms(
                self.deterministic[0], warn_only=self.deterministic[1]
            )
        if self._filters_changed():
            warnings.filters[:] = self.warning_filters  # type: ignore[index]
            warnings._filters_mutated()  # type: ignore[attr-defined]
        if self.numpy_random is not None and "numpy" in sys.modules:
            self.numpy_random.restore()
        random.setstate(self.python_rng)  # cheaper than reading it to compare
        restore_process(self.process, now.process, environ=len(sys.modules) == self.modules)
