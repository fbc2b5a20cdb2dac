"""The result every checker returns: a verdict, a one-line title and a few lines of detail.

Introduced in ``00_start_here.ipynb``. A :class:`CheckResult` is a plain value that tests
can assert on (``.passed``, ``.status``, ``.message``) and that displays itself in Jupyter
as a coloured box (HTML) or, elsewhere, as plain text. The verdicts every checker gives
alike are written here once: the untouched stub (:func:`stub_verdict`,
:func:`callable_verdict`), learner code that raised (:func:`from_learner_error`), a global
setting it left changed (:func:`side_effect_verdict`), and anything else it changed that
outlives its call (:func:`lasting_change`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from autograd_helpers._common.boxes import box_html, box_text

if TYPE_CHECKING:
    from autograd_helpers._common.runner import Outcome

__all__ = [
    "STUB_HINT",
    "CheckResult",
    "Status",
    "callable_verdict",
    "failed",
    "first_found",
    "from_learner_error",
    "lasting_change",
    "not_implemented",
    "outlived",
    "printed_lines",
    "raised_verdict",
    "side_effect_verdict",
    "stub_verdict",
]

STUB_HINT = "Replace the `...` with your code."

_Subject = TypeVar("_Subject")
_Found = TypeVar("_Found")

Status = Literal["passed", "failed", "not implemented"]

_ICON = {"passed": "✅", "failed": "❌", "not implemented": "📝"}
_COLOUR = {"passed": "#1a7f37", "failed": "#cf222e", "not implemented": "#9a6700"}


@dataclass(frozen=True)
class CheckResult:
    """A checker's verdict on one exercise.

    Attributes:
        status: ``"passed"``, ``"failed"`` or ``"not implemented"`` (the stub is untouched).
        title: one sentence, e.g. ``"MySigmoid: the gradient for x is off."``.
        details: further lines: where, by how much, a hint.

    Example::

        >>> result = CheckResult("failed", "Cube: the gradient for x is off.", ("Hint: ...",))
        >>> result.passed
        False
        >>> print(result.message)
        ❌ Cube: the gradient for x is off.
           Hint: ...
    """

    status: Status
    title: str
    details: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in _ICON:
            raise ValueError(
                f"CheckResult(): status must be one of {sorted(_ICON)}, got {self.status!r}"
            )

    @property
    def passed(self) -> bool:
        """True only when the check passed."""
        return self.status == "passed"

    @property
    def message(self) -> str:
        """The full feedback as plain text: an icon and the title, then indented details."""
        return box_text(_ICON[self.status], self.title, self.details)

    def __repr__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        return box_html(_ICON[self.status], _COLOUR[self.status], self.title, self.details)


def failed(label: str, title: str, *details: str) -> CheckResult:
    """``❌ label: title``, then the details."""
    return CheckResult("failed", f"{label}: {title}", details)


def not_implemented(label: str, *details: str) -> CheckResult:
    """``📝 label: not implemented yet.``, then the details (where the stub is)."""
    return CheckResult("not implemented", f"{label}: not implemented yet.", details)


def first_found(
    checks: Iterable[Callable[[_Subject], _Found | None]], subject: _Subject
) -> _Found | None:
    """What the first of a table of named checks finds on ``subject`` (``None``: nothing).

    Example::

        >>> checks = (lambda x: None, lambda x: f"{x} is odd" if x % 2 else None)
        >>> first_found(checks, 3), first_found(checks, 4)
        ('3 is odd', None)
    """
    for check in checks:
        if (found := check(subject)) is not None:
            return found
    return None


def stub_verdict(label: str, *answers: object, hint: str = STUB_HINT) -> CheckResult | None:
    """``📝 label: not implemented yet.`` when an answer is still the stub's ``...``.

    Example::

        >>> print(stub_verdict("slowest", ...).message)
        📝 slowest: not implemented yet.
           Replace the `...` with your code.
        >>> stub_verdict("slowest", "data") is None
        True
    """
    return not_implemented(label, hint) if any(a is Ellipsis for a in answers) else None


def callable_verdict(label: str, fn: object) -> CheckResult | None:
    """The stub's verdict, or ``expected a function`` for what cannot be called; else ``None``.

    Example::

        >>> print(callable_verdict("step", 3).title)
        step: expected a function, got int.
    """
    if not callable(fn):
        return stub_verdict(label, fn) or failed(
            label, f"expected a function, got {type(fn).__name__}."
        )
    return None


def printed_lines(text: str, lines: int = 10, width: int = 160) -> tuple[str, ...]:
    """What the learner's code printed, as one detail cut to ``lines`` lines of ``width``."""
    shown = [
        line if len(line) <= width else line[: width - 1] + "…"
        for line in text.rstrip().splitlines()
    ]
    if not shown:
        return ()
    more = f"\n(… {len(shown) - lines} more lines)" if len(shown) > lines else ""
    return ("Your code printed:\n" + "\n".join(shown[:lines]) + more,)


def from_learner_error(
    label: str, stage: str, outcome: Outcome, *, hint: str | None = None
) -> CheckResult:
    """The verdict for learner code that raised: "not implemented yet" for a stub, else the
    exception and the learner's line (``stage`` says when: ``"forward"``, ``"backward"``...).
    A ``hint`` (what the error likely means here) ends the details.
    """
    from autograd_helpers._common.runner import OutputLimitError

    error = outcome.error
    if error is None:
        raise ValueError("from_learner_error(): outcome holds no error")
    hints = (hint,) if hint else ()
    if error.is_stub:
        where = f" in `{error.function}`" if error.function else ""
        return not_implemented(
            label,
            f"Replace the `raise NotImplementedError`{where} with your code, then run this "
            "cell again.",
            *hints,
        )
    if isinstance(error.exception, OutputLimitError):
        where = error.where
        return failed(label, f"{stage} printed too much.", str(error.exception), where, *hints)
    details = [error.describe(), *([error.where] if error.where else [])]
    return failed(
        label,
        f"{stage} raised an exception.",
        *details,
        *printed_lines(outcome.printed),
        *hints,
    )


def raised_verdict(
    label: str, stage: str, outcome: Outcome, *, hint: str | None = None
) -> CheckResult | None:
    """:func:`from_learner_error` if the learner's code raised, else ``None``."""
    if outcome.error is None:
        return None
    return from_learner_error(label, stage, outcome, hint=hint)


def outlived(stage: str, changes: Sequence[str], *, by: str = "checker") -> tuple[str, str]:
    """The title and the advice for the first global setting a call left changed.

    ``changes`` are :attr:`Outcome.side_effects <autograd_helpers._common.runner.Outcome>`
    (``"it left grad mode off (...): use ..."``); ``stage`` starts the title (``""``: none).

    Example::

        >>> title, advice = outlived("backward", ["it left grad mode on: use a `with` block"])
        >>> title
        'backward left grad mode on.'
        >>> print(advice)
        The checker put it back, but in your notebook it would stay: use a `with` block.
    """
    title, _, advice = changes[0].removeprefix("it ").partition(": ")
    return (
        f"{stage} {title}." if stage else f"{title}.",
        f"The {by} put it back, but in your notebook it would stay: {advice}.",
    )


def side_effect_verdict(label: str, stage: str, changes: Sequence[str]) -> CheckResult | None:
    """``❌ label: backward left grad mode off (...).``: a global setting outlived the call
    (``None`` when ``changes``, an outcome's ``side_effects``, is empty).

    Example::

        >>> changes = ["it left grad mode on: switch it inside a `with` block"]
        >>> print(side_effect_verdict("Cube", "backward", changes).title)
        Cube: backward left grad mode on.
        >>> side_effect_verdict("Cube", "backward", []) is None
        True
    """
    return failed(label, *outlived(stage, changes)) if changes else None


def lasting_change(label: str, title: str, changes: Sequence[str], after: str) -> CheckResult:
    """The verdict for changes that outlive a call: each in words, then why it matters.

    ``changes`` are sentences such as ``"it changed the tensor `w` (its values)"``;
    ``after`` says what the change would go on to affect.

    Example::

        >>> result = lasting_change(
        ...     "loss", "your loss changed something that outlives the call.",
        ...     ["it set the global variable `cache`"], "what runs after",
        ... )
        >>> result.details[0]
        'It set the global variable `cache`.'
    """
    sentences = [change[:1].upper() + change[1:] + "." for change in changes]
    return failed(
        label,
        title,
        *sentences,
        f"The checker put it back, but in your notebook it would stay and change {after}.",
    )
