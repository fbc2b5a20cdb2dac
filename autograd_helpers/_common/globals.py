"""torch's process and thread settings that learner code could leave changed.

Used by the learner-code runner: each call into learner code runs between
:meth:`GlobalState.take` and :meth:`GlobalState.restore`, so that nothing it switches
outlives it, and :meth:`GlobalState.changes` says in plain words what it would have left
changed (a checker's verdict of its own). The random states (torch's, NumPy's global one,
Python's ``random``) are only put back: using random numbers is no mistake, but drawing them
must not change what the notebook draws next (reseeding is judged where the calls are seen,
in ``checks.function._conduct``).
"""

from __future__ import annotations

import logging
import os
import random
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch._tensor_str import PRINT_OPTS

__all__ = ["GlobalState", "flush_denormal"]


def flush_denormal() -> bool:
    """Is ``torch.set_flush_denormal(True)`` on? (torch has no getter: a denormal flushed.)"""
    return bool((torch.tensor([1e-40], dtype=torch.float32) * 1.0).item() == 0.0)


def _deterministic() -> tuple[bool, bool]:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )


def _default_device() -> Any:
    """The device ``torch.set_default_device`` set (``None``: never set, or set back)."""
    context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    return None if context is None else context.device


def _environment() -> dict[Any, Any]:
    """The environment variables, as ``os.environ`` keeps them (encoded: a fast copy)."""
    return dict(getattr(os.environ, "_data", os.environ))


def _set_environment(before: dict[Any, Any]) -> None:
    environ: Any = os.environ
    decode = getattr(environ, "decodekey", None), getattr(environ, "decodevalue", None)
    wanted = (
        {decode[0](k): decode[1](v) for k, v in before.items()}
        if decode[0] is not None and decode[1] is not None
        else before
    )
    for key in set(os.environ) - set(wanted):
        del os.environ[key]
    os.environ.update(wanted)


def _numpy_settings() -> Any:
    numpy = sys.modules.get("numpy")
    return None if numpy is None else (numpy.geterr(), numpy.get_printoptions())


def _process_settings() -> dict[str, Any]:
    """Process-wide switches beyond torch's numerics, each read by its own getter."""
    return {
        "cudnn": (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark),
        "mkldnn": torch.backends.mkldnn.enabled,
        "device": _default_device(),
        "recursion": sys.getrecursionlimit(),
        "environ": _environment(),
        "warn_always": torch.is_warn_always_enabled(),
        "multithreading": torch._C._is_multithreading_enabled(),
        "numpy": _numpy_settings(),
        "logging": logging.root.manager.disable,
    }


# What each process setting left changed is called, and how to avoid it.
_PROCESS_WORDS = {
    "cudnn": "cuDNN's flags changed (`torch.backends.cudnn.deterministic`/`benchmark`)",
    "mkldnn": "oneDNN switched (`torch.backends.mkldnn.enabled`)",
    "device": "the default device set (`torch.set_default_device`; use `device=` or "
    "`with torch.device(...):`)",
    "recursion": "Python's recursion limit changed (`sys.setrecursionlimit`)",
    "environ": "environment variables changed (`os.environ`)",
    "warn_always": "torch's warnings repeated (`torch.set_warn_always`)",
    "multithreading": "autograd's multithreading switched "
    "(`torch.autograd.set_multithreading_enabled`; use it as a `with` block)",
    "numpy": "NumPy's error handling or print options changed (`np.seterr`, "
    "`np.set_printoptions`; use `with np.errstate(...):` or `np.printoptions(...)`)",
    "logging": "logging disabled (`logging.disable`)",
}


def _restore_process(settings: dict[str, Any], *, environ: bool) -> None:
    now = _process_settings()
    with getattr(torch.backends, "__allow_nonbracketed_mutation")():  # also when frozen
        if now["cudnn"] != settings["cudnn"]:
            cudnn = torch.backends.cudnn
            cudnn.deterministic, cudnn.benchmark = settings["cudnn"]
        if now["mkldnn"] != settings["mkldnn"]:
            torch.backends.mkldnn.enabled = settings["mkldnn"]
    if now["device"] != settings["device"]:
        torch.set_default_device(settings["device"])
    if now["recursion"] != settings["recursion"]:
        sys.setrecursionlimit(settings["recursion"])
    if environ and now["environ"] != settings["environ"]:
        _set_environment(settings["environ"])
    if now["warn_always"] != settings["warn_always"]:
        torch.set_warn_always(settings["warn_always"])
    if now["multithreading"] != settings["multithreading"]:
        torch.autograd.set_multithreading_enabled(settings["multithreading"])
    numpy = sys.modules.get("numpy")
    if now["numpy"] != settings["numpy"] and numpy is not None and settings["numpy"]:
        numpy.seterr(**settings["numpy"][0])
        numpy.set_printoptions(**settings["numpy"][1])
    if now["logging"] != settings["logging"]:
        logging.disable(settings["logging"])


def _numpy_state() -> Any:
    numpy = sys.modules.get("numpy")  # never imported here for a notebook that has not
    return None if numpy is None else numpy.random.get_state()


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
    numpy_rng: Any
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
            numpy_rng=_numpy_state(),
            python_rng=random.getstate(),
            process=_process_settings(),
        )

    def changes(self) -> list[str]:
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
        found += self._display_changes()
        return found

    def _filters_changed(self) -> bool:
        """Did the call change the warnings filters (not a module it imported, as torch does)?"""
        return warnings.filters != self.warning_filters and len(sys.modules) == self.modules

    def _display_changes(self) -> list[str]:
        """Printing, denormals, matmul precision and warnings: settings for the whole process."""
        found = []
        if vars(PRINT_OPTS) != self.print_options:
            found.append(
                "it left torch's print options changed (`torch.set_printoptions` is for the "
                'whole notebook): format a value where you print it (`f"{x:.2f}"`)'
            )
        if flush_denormal() != self.flush_denormal:
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
        now = _process_settings()
        if len(sys.modules) != self.modules:  # an import may set environment variables
            now["environ"] = self.process["environ"]
        found += [
            f"it left {words} (for the whole process): leave it alone, or set it back in a "
            "`try`/`finally`"
            for key, words in _PROCESS_WORDS.items()
            if now[key] != self.process[key]
        ]
        return found

    def restore(self) -> None:
        """Put every setting back (grad mode for this thread)."""
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_anomaly_enabled(self.anomaly_enabled, self.anomaly_check_nan)
        torch.set_default_dtype(self.default_dtype)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_rng_state(self.rng)
        if vars(PRINT_OPTS) != self.print_options:
            vars(PRINT_OPTS).update(self.print_options)
        if flush_denormal() != self.flush_denormal:
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
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy_rng is not None:
            numpy.random.set_state(self.numpy_rng)
        random.setstate(self.python_rng)
        _restore_process(self.process, environ=len(sys.modules) == self.modules)
