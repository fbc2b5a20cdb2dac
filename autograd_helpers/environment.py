"""Environment check: is this the software stack the course was recorded with?

Introduced in ``00_start_here.ipynb``. The pins come from the installed package's own
metadata (``pyproject.toml`` is the single source), so this check never goes stale.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import sys
from dataclasses import dataclass

__all__ = ["EnvironmentReport", "check_environment", "course_pins"]

_DISTRIBUTION = "autograd-helpers"
_PIN = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^;\s]+)\s*(?:;\s*(.*))?$")


def course_pins(extras: tuple[str, ...] = ("lab",)) -> dict[str, str]:
    """Return ``{package: pinned version}`` for the runtime stack and the given extras.

    Args:
        extras: optional-dependency groups to include besides the runtime dependencies
            (``"lab"``, ``"test"``, ``"dev"``).

    Example::

        >>> from autograd_helpers.environment import course_pins
        >>> course_pins()["torch"]
        '2.13.0'
    """
    if not isinstance(extras, tuple) or not all(isinstance(e, str) for e in extras):
        raise TypeError(f"course_pins(): extras must be a tuple of str, got {extras!r}")
    known = metadata.metadata(_DISTRIBUTION).get_all("Provides-Extra") or []
    unknown = [extra for extra in extras if extra not in known]
    if unknown:
        raise ValueError(f"course_pins(): unknown extras {unknown}; the course has {sorted(known)}")
    pins: dict[str, str] = {}
    for requirement in metadata.requires(_DISTRIBUTION) or []:
        match = _PIN.match(requirement)
        if match is None:
            continue
        name, version, marker = match.groups()
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker or "")
        if extra is None or extra.group(1) in extras:
            pins[name] = version
    return pins


def _installed_version(package: str) -> str | None:
    try:
        # "2.13.0+cpu" is the CPU build of 2.13.0: compare the public part only.
        return metadata.version(package).split("+")[0]
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class EnvironmentReport:
    """Python's version and each pinned package's installed version; displays as a table.

    ``ok`` is ``True`` when Python is new enough and every pin matches.
    """

    python: tuple[int, int]
    packages: tuple[tuple[str, str, str | None], ...]  # (name, pinned, installed or None)

    @property
    def mismatched(self) -> list[str]:
        """Names of the packages whose installed version differs from the pin."""
        return [name for name, pinned, installed in self.packages if installed != pinned]

    @property
    def ok(self) -> bool:
        return self.python >= (3, 11) and not self.mismatched

    def __str__(self) -> str:
        major, minor = self.python
        python_mark = "✓" if self.python >= (3, 11) else "✗"
        lines = [f"Python {major}.{minor} {python_mark} (the course needs 3.11 or newer)"]
        width = max([len("package")] + [len(name) for name, _, _ in self.packages])
        lines.append(f"{'package':<{width}}  {'pinned':<8}  installed")
        for name, pinned, installed in self.packages:
            mark = "✓" if installed == pinned else "✗"
            lines.append(f"{name:<{width}}  {pinned:<8}  {installed or 'missing'} {mark}")
        if self.ok:
            lines.append(
                f"All {len(self.packages)} pinned packages match: your outputs will match the "
                "course's."
            )
        else:
            lines.append(
                "Differs from the course's stack: "
                + ", ".join(self.mismatched or ["python"])
                + ". Run `make lab` from the course folder to get the pinned environment."
            )
        return "\n".join(lines)

    __repr__ = __str__


def check_environment() -> EnvironmentReport:
    """Compare the running Python and installed packages with the course's pins.

    Outputs in the course notebooks were recorded with exactly these versions; with others
    most things still work, but printed numbers and messages may differ.

    Returns:
        An :class:`EnvironmentReport`: it displays as a table, and ``.ok`` says whether
        everything matches.

    Example::

        >>> import autograd_helpers as ah
        >>> ah.environment.check_environment().ok  # doctest: +SKIP
        True
    """
    pins = course_pins()
    packages = tuple(
        (name, pinned, _installed_version(name)) for name, pinned in sorted(pins.items())
    )
    return EnvironmentReport((sys.version_info.major, sys.version_info.minor), packages)
