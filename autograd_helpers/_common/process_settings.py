"""The process's switches beyond torch's numerics that learner code could leave changed.

Part of :class:`~autograd_helpers._common.globals.GlobalState`: cuDNN's and oneDNN's flags, the
default device, the recursion limit, the environment variables, ``torch.set_warn_always``,
autograd's multithreading, NumPy's error handling and print options, ``logging.disable``.
Each is read by its own getter (:func:`process_settings`), named in plain words when it
changed (:data:`PROCESS_WORDS`) and put back only where it differs (:func:`restore_process`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import torch

__all__ = ["PROCESS_WORDS", "process_settings", "restore_process"]


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


def process_settings() -> dict[str, Any]:
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
PROCESS_WORDS = {
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


def _restore_backends(settings: dict[str, Any], now: dict[str, Any]) -> None:
    with getattr(torch.backends, "__allow_nonbracketed_mutation")():  # also when frozen
        if now["cudnn"] != settings["cudnn"]:
            cudnn = torch.backends.cudnn
            cudnn.deterministic, cudnn.benchmark = settings["cudnn"]
        if now["mkldnn"] != settings["mkldnn"]:
            torch.backends.mkldnn.enabled = settings["mkldnn"]


def restore_process(settings: dict[str, Any], now: dict[str, Any], *, environ: bool) -> None:
    """Put back each of ``settings`` that differs in ``now`` (the environment if ``environ``)."""
    if now["cudnn"] != settings["cudnn"] or now["mkldnn"] != settings["mkldnn"]:
        _restore_backends(settings, now)
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
