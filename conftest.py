"""Root conftest: the environment every test and notebook kernel gets."""

from __future__ import annotations

import os

# Same as the Makefile exports, for a bare `pytest` run: native log lines escape the
# kernels' output capture, so silence them at the source.
for key, value in {
    "KINETO_LOG_LEVEL": "6",
    "TORCH_CPP_LOG_LEVEL": "ERROR",
    "PYTHONHASHSEED": "0",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}.items():
    os.environ.setdefault(key, value)
