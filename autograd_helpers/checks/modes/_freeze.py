"""``check_frozen`` as named checks, run in order from :data:`CHECKS` on every network.

The networks are data (:data:`NETWORKS`): the chapter's own model first, then two whose last
layer sits elsewhere (so fixed indices and names fail), one whose second-to-last module
has parameters (so freezing ``model[:-2]`` fails), and one of eleven modules (so modules
ordered by name, where "10" comes before "2", fail). The learner's ``fn`` freezes each
(:func:`attempt`), then one small function per property judges the result: the call ran and
changed no global setting and none of the notebook's models, the layers are the same objects
in the same dtype with the same values, every layer but the last is frozen and the last is
not, no hook is left on the model, and a backward pass fills the last layer's ``.grad`` and
no other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.modules import (
    ModelRecord,
    NotebookModels,
    listed,
    notebook_kept,
    settings_kept,
)
from autograd_helpers.checks._core.feedback import CheckResult, failed, raised_verdict
from autograd_helpers.checks.modes._cases import chapter_model
from autograd_helpers.checks.modes._contain import (
    Kept,
    contained_call,
    global_calls_kept,
    outside_kept,
)
from autograd_helpers.checks.modes._grads import (
    GradChanges,
    freezing_grads_kept,
    grad_changes,
    with_gradients,
)
from autograd_helpers.checks.modes._kept import (
    Layout,
    attributes_kept,
    dtypes_kept,
    hooks_kept,
    layout_kept,
)

__all__ = ["CHECKS", "NETWORKS", "Attempt", "Network", "attempt", "judge", "mode_note"]


def _deeper() -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(3):
        layers += [nn.Linear(4 if not layers else 8, 8), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(8, 2, bias=False))


def _nested() -> nn.Sequential:
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
    return nn.Sequential(block, nn.Dropout(0.1), nn.Linear(8, 2))


@dataclass(frozen=True)
class Network:
    """A network to freeze: how the feedback calls it, and how to build it."""

    description: str
    build: Callable[[], nn.Sequential]


def _normed() -> nn.Sequential:
    # Its second-to-last module has parameters: freezing `model[:-2]` leaves them learning.
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 2)
    )


def _long() -> nn.Sequential:
    # Eleven modules: ordered by name ("0", "1", "10", "2", ...), the last one is "9", not "10".
    torch.manual_seed(0)
    hidden = [nn.Linear(8, 8) for _ in range(9)]
    return nn.Sequential(nn.Linear(4, 8), *hidden, nn.Linear(8, 2))


NETWORKS = (
    Network("the chapter's model", chapter_model),
    Network("a seven-module network whose last layer (index 6) has no bias", _deeper),
    Network("a three-module network that starts with a nested block", _nested),
    Network(
        "a five-module network whose second-to-last module (a LayerNorm) has parameters",
        _normed,
    ),
    Network("an eleven-module network (its names sort 0, 1, 10, 2, ...)", _long),
)


@dataclass
class Attempt:
    """The learner's ``fn`` called on one network, and what it did."""

    network: Network
    label: str
    model: nn.Sequential
    record: ModelRecord
    notebook: NotebookModels
    outcome: Outcome = field(default_factory=Outcome)
    outside: list[str] = field(default_factory=list)  # what it changed by name, in words
    contained: Kept | None = None  # to put that back, once judged
    layout: Layout | None = None  # the model's attributes, buffers... before the call
    grads: GradChanges | None = None  # what the call did to the gradients the model had

    @property
    def last(self) -> list[str]:
        """The last layer's parameter names, as the whole model names them."""
        index = len(self.model) - 1
        return [f"{index}.{name}" for name, _ in self.model[-1].named_parameters()]

    def fail(self, title: str, *details: str) -> CheckResult:
        return failed(self.label, title, *details)


def attempt(fn: Callable[..., object], network: Network, label: str) -> Attempt:
    model = with_gradients(network.build())  # as in the middle of training
    notebook = NotebookModels(fn, [model])
    run = Attempt(network, label, model, ModelRecord(model), notebook)
    run.layout = Layout(model)
    run.outcome, run.outside, run.contained = contained_call(fn, model)
    run.grads = grad_changes(run.record, model)  # before a check's backward pass changes them
    return run


# --- the checks, in order -------------------------------------------------------------------


def _ran(run: Attempt) -> CheckResult | None:
    return raised_verdict(run.label, f"freezing {run.network.description}", run.outcome)


def _layers_kept(run: Attempt) -> CheckResult | None:
    replaced = run.record.replaced(run.model)
    if replaced:
        return run.fail(
            f"it replaced layers of the model ({listed(replaced)} are new tensors): a new "
            "layer starts from new weights, and an optimizer built before holds the old ones.",
            "Freeze the model's own layers in place: `requires_grad_(False)` on the modules "
            "or parameters it already has.",
        )
    changed = run.record.values_changed(run.model)
    if changed:
        return run.fail(
            f"it changed the values of {listed(changed)}: freezing decides what learns, and "
            "keeps every weight as it was.",
            "Only switch `requires_grad`; do not re-initialise or modify the weights.",
        )
    return None


def _grads_untouched(run: Attempt) -> CheckResult | None:
    assert run.grads is not None
    return freezing_grads_kept(run, run.grads, run.last)


def _earlier_frozen(run: Attempt) -> CheckResult | None:
    last = set(run.last)
    still = [n for n, p in run.model.named_parameters() if n not in last and p.requires_grad]
    if not still:
        return None
    details = [f"Still learning: {listed(sorted(still))}."]
    if any("requires_grad" in vars(module) for module in run.model.modules()):
        details.append(
            "Hint: `module.requires_grad = False` sets a new attribute that nothing reads. "
            "Call `module.requires_grad_(False)`, or set it on each parameter."
        )
    elif _returned_a_copy(run):
        details.append(
            "Hint: it returned another model and left the one it was given learning. Freeze "
            "the model passed in, in place (the exercise's function returns nothing)."
        )
    elif run.record.hooks_added(run.model):
        details.append(
            "Hint: a hook that detaches or zeroes gradients does not freeze: the parameters "
            "still require grad, and an optimizer with weight decay or momentum still moves "
            "them. Switch `requires_grad` off."
        )
    elif run.record.flags_changed(run.model):
        details.append("Hint: `model.eval()` changes dropout and batch norm, not gradients.")
    return run.fail("layers before the last one still get gradients.", *details)


def _returned_a_copy(run: Attempt) -> bool:
    returned = run.outcome.value
    if not isinstance(returned, nn.Module):
        return False
    own = {id(p) for p in run.model.parameters()}
    return not any(id(p) in own for p in returned.parameters())


def _last_learning(run: Attempt) -> CheckResult | None:
    parameters = dict(run.model.named_parameters())
    frozen = [name for name in run.last if not parameters[name].requires_grad]
    if not frozen:
        return None
    return run.fail(
        f"the last layer is frozen too ({listed(frozen)}).",
        "Freeze every layer *but* the last: `model[:-1]` is all of them except the last.",
    )


def _backward(model: nn.Module) -> None:
    model.zero_grad()  # the training loop's next step: the gradients of the last one go
    with torch.enable_grad():
        model(torch.randn(3, 4, dtype=next(model.parameters()).dtype)).sum().backward()


def _gradients_only_on_last(run: Attempt) -> CheckResult | None:
    outcome = run_learner_code(_backward, run.model)  # the learner's hooks may run in it
    stage = "a backward pass through the frozen model"
    if (raised := raised_verdict(run.label, stage, outcome)) is not None:
        return raised
    with_grad = sorted(n for n, p in run.model.named_parameters() if p.grad is not None)
    if with_grad == sorted(run.last):
        return None
    return run.fail(
        f"after backward these have a .grad: {listed(with_grad)}; only the last layer's "
        f"({listed(run.last)}) should.",
        "A frozen parameter gets no `.grad` at all: switch `requires_grad` off rather than "
        "changing the gradient that arrives.",
    )


Check = Callable[[Attempt], CheckResult | None]
CHECKS: tuple[Check, ...] = (
    _ran,
    settings_kept,
    notebook_kept,
    outside_kept,
    dtypes_kept("freezing"),
    _layers_kept,
    _grads_untouched,
    _earlier_frozen,
    _last_learning,
    hooks_kept("freezing"),
    attributes_kept("freezing"),
    layout_kept("freezing"),
    global_calls_kept,
    _gradients_only_on_last,
)
# These say the function works on the chapter's model and not on another: found by index.
_DEPENDS_ON_THE_NETWORK = (_earlier_frozen, _last_learning, _gradients_only_on_last)


def judge(run: Attempt, first: Network) -> CheckResult | None:
    """The first problem the checks find with one network, or None."""
    for check in CHECKS:
        result = check(run)
        if result is None:
            continue
        if run.network is first or check not in _DEPENDS_ON_THE_NETWORK:
            return result
        title = result.title.removeprefix(f"{run.label}: ")
        return run.fail(
            f"it works for {first.description} but not for {run.network.description}: {title}",
            *result.details,
            "Hint: find the layers from the model itself (`model[:-1]`, `model[-1]`), not "
            "from fixed indices or names: a network of another depth has its last layer "
            "elsewhere.",
        )
    return None


def mode_note(run: Attempt) -> str | None:
    """A note when the function also switched layers' train/eval mode (allowed, not needed)."""
    modules = dict(run.model.named_modules())
    changed = run.record.flags_changed(run.model)
    if not changed:
        return None
    switched = [
        f"{listed([name or 'the model' for name in changed if modules[name].training == to])} "
        f"to {'train' if to else 'eval'} mode"
        for to in (False, True)
        if any(modules[name].training == to for name in changed)
    ]
    return (
        f"Note: it also switched {' and '.join(switched)}. Freezing does not need that. In "
        "eval mode a frozen batch norm keeps its running statistics fixed, which "
        "`requires_grad_(False)` alone does not; a later `model.train()` switches it back."
    )
