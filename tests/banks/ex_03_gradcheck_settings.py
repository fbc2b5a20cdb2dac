"""Chapter 03, ``03-gradcheck-settings``: a dtype and an eps that make gradcheck meaningful."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def choose(dtype: str, eps: str, before: str = "") -> str:
    """The exercise cell: ``dtype = ...``, ``eps = ...`` (after ``before``)."""
    return f"{before.strip()}\ndtype = {dtype}\neps = {eps}\n".lstrip()


BANK = bank(
    "03-gradcheck-settings",
    # --- wrong formula: settings that mean nothing
    wrong(
        "wrong formula",
        "float32, gradcheck's default eps",
        choose("torch.float32", "1e-6"),
        "float64",
    ),
    wrong("wrong formula", "float32 with a larger eps", choose("torch.float32", "1e-3"), "No eps"),
    wrong(
        "wrong formula",
        "float64, eps far too large",
        choose("torch.float64", "1e-1"),
        "Truncation error dominates",
    ),
    wrong(
        "wrong formula",
        "float64, eps far too small",
        choose("torch.float64", "1e-12"),
        "Rounding error dominates",
    ),
    wrong("wrong formula", "float16", choose("torch.float16", "1e-3"), "float16"),
    wrong("wrong formula", "bfloat16", choose("torch.bfloat16", "1e-2"), "bfloat16"),
    # --- right only at the example
    wrong(
        "right only at the example",
        "an eps whose rounding error passes at 7 points only",
        choose("torch.float64", "3e-10"),
        "beyond them",
    ),
    wrong(
        "right only at the example",
        "eps at the rounding edge",
        choose("torch.float64", "2e-10"),
        "beyond them",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "silences gradcheck's float32 warning",
        choose("torch.float32", "1e-3", before="warnings.filterwarnings('ignore')"),
        "float32",
    ),
    wrong(
        "symptom fix",
        "float32 with a coarse eps to beat the rounding",
        choose("torch.float32", "1e-2"),
        "No eps",
    ),
    # --- wrong type or shape
    wrong("wrong type or shape", "float8", choose("torch.float8_e4m3fn", "1e-3"), "float8"),
    wrong("wrong type or shape", "an integer dtype", choose("torch.int64", "1e-6"), "integer"),
    wrong("wrong type or shape", "a complex dtype", choose("torch.complex128", "1e-6"), "complex"),
    wrong(
        "wrong type or shape", "dtype and eps swapped", choose("1e-6", "torch.float64"), "swapped"
    ),
    wrong("wrong type or shape", "a number as dtype", choose("64.0", "1e-6"), "torch.float64"),
    wrong("wrong type or shape", "the dtype as a string", choose("'float64'", "1e-6"), "string"),
    wrong(
        "wrong type or shape",
        "NumPy's dtype",
        choose("np.float64", "1e-6", before="import numpy as np"),
        "NumPy",
    ),
    wrong("wrong type or shape", "eps as a string", choose("torch.float64", "'1e-6'"), "string"),
    wrong("wrong type or shape", "eps negative", choose("torch.float64", "-1e-6"), "positive"),
    wrong("wrong type or shape", "eps NaN", choose("torch.float64", "float('nan')"), "nan"),
    wrong("wrong type or shape", "eps zero", choose("torch.float64", "0"), "eps is 0"),
    wrong("wrong type or shape", "eps as a list", choose("torch.float64", "[1e-6]"), "list"),
    wrong(
        "wrong type or shape",
        "eps as a tensor of several steps",
        choose("torch.float64", "torch.tensor([1e-6, 1e-4])"),
        "one number",
    ),
    wrong("wrong type or shape", "eps True", choose("torch.float64", "True"), "bool"),
    wrong(
        "wrong type or shape",
        "eps NumPy's True",
        choose("torch.float64", "np.True_", before="import numpy as np"),
        "True (a bool",
    ),
    wrong(
        "wrong type or shape",
        "eps on the meta device (crashed the checker before)",
        choose("torch.float64", "torch.tensor(1e-6, device='meta')"),
        "meta device",
    ),
    wrong("wrong type or shape", "eps as bytes", choose("torch.float64", "b'1e-6'"), "bytes"),
    wrong(
        "wrong type or shape",
        "eps too large for a float (crashed the checker before)",
        choose("torch.float64", "10**400"),
        "too large",
    ),
    wrong(
        "symptom fix",
        "defines shifted again, as a function float32 can check",
        choose("torch.float32", "1e-2", before="def shifted(t):\n    return torch.sin(t)\n"),
        "defined again",
    ),
    # --- right, written differently
    right("float64, eps 1e-3", choose("torch.float64", "1e-3")),
    right("torch.double, 1e-8", choose("torch.double", "1e-8")),
    right("eps as a tensor", choose("torch.float64", "torch.tensor(1e-6)")),
    right(
        "eps as a NumPy number",
        choose("torch.float64", "np.float64(1e-5)", before="import numpy as np"),
    ),
    right("eps as a power", choose("torch.float64", "10 ** -7")),
    right(
        "dtype from a float64 tensor", choose("torch.zeros(1, dtype=torch.float64).dtype", "2e-6")
    ),
    right("Python's float as the dtype", choose("float", "1e-6"), "Note"),
    right(
        "shifted defined again, the same function",
        choose(
            "torch.float64",
            "1e-6",
            before="def shifted(t):\n    return 500 + 0.05 * torch.sin(3 * t)\n",
        ),
        "defined again",
    ),
    right(
        "eps as a tensor that requires grad",
        choose("torch.float64", "torch.tensor(1e-6, requires_grad=True)"),
    ),
    right("eps from finfo", choose("torch.float64", "torch.finfo(torch.float64).eps ** (1 / 3)")),
    # --- from issue 25: each was told something that points the wrong way before
    wrong(
        "wrong formula",
        "float64 with eps 1e-14, below the spacing of the values",
        choose("torch.float64", "1e-14"),
        "needs a much larger eps",
    ),
    wrong(
        "wrong formula",
        "float64 with machine epsilon as the step",
        choose("torch.float64", "torch.finfo(torch.float64).eps"),
        "needs a much larger eps",
    ),
    wrong(
        "side effect",
        "float64 made the default dtype for the whole notebook",
        choose("torch.float64", "1e-6", before="torch.set_default_dtype(torch.float64)"),
        "default dtype is float64",
    ),
    wrong(
        "side effect",
        "the dtype read back from a changed default",
        choose("torch.get_default_dtype()", "1e-6", before="torch.set_default_dtype(torch.double)"),
        "default dtype is float64",
    ),
    # --- side effect: the exercise's setup changed (last: it stays for the answers after them)
    wrong(
        "side effect",
        "other points, where float32 passes",
        choose("torch.float32", "1e-3", before='exercise_2["x"] = torch.linspace(-1, 1, 7)'),
        "`x` holds other points than the exercise's",
    ),
    wrong(
        "bypassed mechanism",
        "shifted's code swapped for sin, which float32 can check",
        choose(
            "torch.float32",
            "1e-3",
            before="shifted.__code__ = (lambda t: torch.sin(t)).__code__",
        ),
        "the exercise's setup was changed",
    ),
    wrong(
        "bypassed mechanism",
        "exercise_2's function replaced by torch.sin",
        choose("torch.float32", "1e-3", before='exercise_2["fn"] = torch.sin'),
        "the exercise's setup was changed",
    ),
    wrong(
        "bypassed mechanism",
        "exercise_2 set up again with torch.sin",
        choose(
            "torch.float32", "1e-3", before='exercise_2 = {"fn": torch.sin, "x": points.clone()}'
        ),
        "the exercise's setup was changed",
    ),
)
