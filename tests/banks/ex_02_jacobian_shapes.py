"""Chapter 02, ``02-jacobian-shapes``: predict the shapes of six Jacobians.

The answers that change the notebook itself (a backward pass through a problem's tensor,
torch's global settings) come last: the checker judges what the cell left, and does not
undo it, so they stay for the answers after them; each of their verdicts names every
change still there, its own included.
"""

from __future__ import annotations

from textwrap import dedent

from tests.banks import bank, right, wrong

SOLUTION = "[(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"


def predict(shapes: str, before: str = "") -> str:
    """The exercise cell: ``predicted = <shapes>`` (after ``before``)."""
    return f"{dedent(before).strip()}\npredicted = {shapes}\n".lstrip()


BANK = bank(
    "02-jacobian-shapes",
    # --- right, written differently
    right(
        "lists instead of tuples",
        predict("[[3, 4], [5, 3], [3, 2, 2, 3], [4, 4, 2], [[2, 3], [2, 3, 2]], [2, 1, 2, 3]]"),
    ),
    right(
        "torch.Size objects",
        predict(
            "[torch.Size([3, 4]), torch.Size([5, 3]), torch.Size([3, 2, 2, 3]), "
            "torch.Size([4, 4, 2]), (torch.Size([2, 3]), torch.Size([2, 3, 2])), torch.Size([2, 1, 2, 3])]"
        ),
    ),
    right(
        "output shape + input shape, spelled out",
        predict(
            "[() + (3, 4), (5,) + (3,), (3, 2) + (2, 3), (4,) + (4, 2), ((2,) + (3,), (2,) + (3, 2)), (2, 1) + (2, 3)]"
        ),
    ),
    right("a tuple of predictions", predict(SOLUTION.replace("[", "(", 1).rstrip("]") + ")")),
    right(
        "appended one by one, with NumPy integers",
        """
        import numpy as np

        predicted = []
        predicted.append((np.int64(3), np.int64(4)))
        predicted.append((5, 3))
        predicted.append((3, 2, 2, 3))
        predicted.append((4, 4, 2))
        predicted.append(((2, 3), (2, 3, 2)))
        predicted.append((2, 1, 2, 3))
        """,
    ),
    right(
        "3.0 for 3",
        predict("[(3.0, 4.0), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"),
    ),
    right(
        "a generator (used up by the check: a note)",
        predict(f"(shape for shape in {SOLUTION})"),
        "iterator",
    ),
    right(
        "computed with jacobian() instead of predicted: the checker sees only the list "
        "(undetectable; the exercise text says so)",
        predict(
            "[tuple(jacobian(f, x).shape) if isinstance(x, torch.Tensor) "
            "else tuple(tuple(j.shape) for j in jacobian(f, x)) for f, x in problems.values()]"
        ),
    ),
    # --- wrong formula
    wrong(
        "wrong formula",
        "the input's shape first",
        predict("[(3, 4), (3, 5), (2, 3, 3, 2), (4, 2, 4), ((3, 2), (3, 2, 2)), (2, 3, 2, 1)]"),
        "the output's shape comes first",
    ),
    wrong(
        "wrong formula",
        "flattened to matrices",
        predict("[(12,), (5, 3), (6, 6), (4, 8), ((2, 3), (2, 6)), (2, 6)]"),
        "flattened",
    ),
    wrong(
        "wrong formula",
        "the output's shape only",
        predict("[(), (5,), (3, 2), (4,), ((2,), (2,)), (2, 1)]"),
        "the output's shape alone",
    ),
    wrong(
        "wrong formula",
        "the input's shape only",
        predict("[(3, 4), (3,), (2, 3), (4, 2), ((3,), (3, 2)), (2, 3)]"),
        "the input's shape alone",
    ),
    wrong(
        "wrong formula",
        "a 1 for the scalar output",
        predict("[(1, 3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"),
        "adds no dimension",
    ),
    wrong(
        "wrong formula",
        "x.T's output taken as (2, 3)",
        predict("[(3, 4), (5, 3), (2, 3, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"),
        "the input's part is right",
    ),
    wrong(
        "wrong formula",
        "one Jacobian for two inputs",
        predict("[(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), (2, 3, 2), (2, 1, 2, 3)]"),
        "one Jacobian per input",
    ),
    wrong(
        "wrong formula",
        "the two inputs' Jacobians swapped",
        predict("[(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3, 2), (2, 3)), (2, 1, 2, 3)]"),
        "in the order of the inputs",
    ),
    wrong(
        "right only at the example",
        "keepdim's size-1 dimension squeezed away",
        predict("[(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 2, 3)]"),
        "a size-1 dimension stays in the shape",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "shapes as strings",
        predict(
            "['(3, 4)', '(5, 3)', '(3, 2, 2, 3)', '(4, 4, 2)', '((2, 3), (2, 3, 2))', '(2, 1, 2, 3)']"
        ),
        "a string; write the tuple itself",
    ),
    wrong(
        "wrong type or shape",
        "a dict keyed by description",
        predict(f"dict(zip(problems, {SOLUTION}))"),
        "got a dict",
    ),
    wrong(
        "wrong type or shape", "one shape for every problem", predict("(3, 4)"), "that is one shape"
    ),
    wrong(
        "wrong type or shape",
        "a set of shapes",
        predict("{(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)}"),
        "which has no order",
    ),
    wrong(
        "wrong type or shape",
        "True for a size",
        predict("[(3, 4), (5, True), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"),
        "which is not a shape",
    ),
    wrong(
        "wrong type or shape",
        "a trailing comma: a tuple holding the list (fresh audit, round B)",
        predict("[(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)],"),
        "1 prediction for 6 problems: one per problem. `predicted` is a tuple holding your list",
    ),
    # --- symptom fix: answering only what the checker did not complain about
    wrong(
        "symptom fix",
        "drops the problem it could not do",
        predict("[(3, 4), (5, 3), (3, 2, 2, 3), (4, 4, 2), (2, 1, 2, 3)]"),
        "5 predictions for 6 problems",
    ),
    wrong(
        "symptom fix",
        "None for the one it could not do",
        predict("[(3, 4), (5, 3), None, (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"),
        "which is not a shape",
    ),
    wrong(
        "symptom fix",
        "... for the one it could not do",
        predict("[(3, 4), (5, 3), ..., (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]"),
        "not answered yet",
    ),
    # --- side effect (last: what they change stays for the answers after them)
    wrong(
        "side effect",
        "redefines B with another shape to try something",
        predict(SOLUTION, before="B = torch.randn(5, 4)"),
        "cannot be run now",
    ),
    wrong(
        "side effect",
        "redefines B with another batch size",
        predict(SOLUTION, before="B = torch.randn(4, 3)"),
        "`B` has shape (4, 3), not the (5, 3)",
    ),
    wrong(
        "side effect",
        "checks a prediction with a backward pass through the notebook's tensor",
        predict(
            SOLUTION,
            before="""
            sum_, x_sum = problems["x.sum(), x: (3, 4)"]
            sum_(x_sum.requires_grad_()).backward()
            print(x_sum.grad.shape)
            """,
        ),
        "has a .grad from a backward pass",
    ),
    wrong(
        "side effect",
        "sets the default dtype to float64 for good",
        predict(SOLUTION, before="torch.set_default_dtype(torch.float64)"),
        "the default dtype is torch.float64",
    ),
    wrong(
        "side effect",
        "switches anomaly mode on for good",
        predict(SOLUTION, before="torch.autograd.set_detect_anomaly(True)"),
        "anomaly mode is on",
    ),
    wrong(
        "side effect",
        "switches grad mode off: predicting needs no gradients",
        predict(SOLUTION, before="torch.set_grad_enabled(False)"),
        "grad mode is off",
    ),
    wrong(
        "side effect",
        "tries a problem with add_ on its tensor",
        predict(SOLUTION, before='problems["x.T, x: (2, 3)"][1].add_(1)'),
        "changed in place",
    ),
    # from issue 25's learner audit: a problem changed, then set up again (both stay)
    wrong(
        "bypassed mechanism",
        "rebuilds `problems` with a problem of its own in place of one, then sets it up again",
        predict(
            "[(3, 4), (5, 3), (3, 2, 2, 3), (4, 2, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]",
            before="""
            problems = {**problems, "(x * x).sum(1), x: (4, 2)": (lambda x: x * x, torch.randn(4, 2))}
            shapes_set_up = ah.checks.set_up_jacobian_shapes(problems)
            """,
        ),
        "the problem '(x * x).sum(1), x: (4, 2)' was changed",
    ),
    wrong(
        "bypassed mechanism",
        "changes a problem, then sets the problems up again",
        predict(
            "[(3, 4), (5, 3), (3, 2, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]",
            before="""
            problems["x.T, x: (2, 3)"] = (lambda x: x.sum(0), torch.randn(2, 3))
            shapes_set_up = ah.checks.set_up_jacobian_shapes(problems)
            """,
        ),
        "the problem 'x.T, x: (2, 3)' was changed",
    ),
    wrong(
        "symptom fix",
        "drops the problem it could not do from the notebook's problems",
        predict(
            "[(3, 4), (5, 3), (4, 4, 2), ((2, 3), (2, 3, 2)), (2, 1, 2, 3)]",
            before='problems.pop("x.T, x: (2, 3)")',
        ),
        "'x.T, x: (2, 3)' is missing from the notebook's",
    ),
    wrong(
        "side effect",
        "empties the problems (crashed the check cell before)",
        predict(SOLUTION, before="problems = {}"),
        "is missing from the notebook's",
    ),
    wrong(
        "wrong type or shape",
        "turns the problems into a list (crashed the check cell before)",
        predict(SOLUTION, before="problems = list(problems.items())"),
        "it is now a list",
    ),
)
