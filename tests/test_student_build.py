"""tools.student: solutions become stubs that keep every cell runnable; bad markers are errors."""

from __future__ import annotations

import nbformat
import pytest

from tools.student import StudentBuildError, build_student_notebook, student_source

INSIDE_A_FUNCTION = """\
class Cube(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        ### BEGIN SOLUTION
        return grad_output * 3 * x**2
        ### END SOLUTION
"""


def test_a_span_inside_a_function_becomes_raise_not_implemented():
    out = student_source(INSIDE_A_FUNCTION, "nb, cell 1")
    assert "grad_output * 3" not in out and "SOLUTION" not in out
    assert out.splitlines()[-2:] == [
        "        # YOUR CODE HERE",
        '        raise NotImplementedError("Exercise: replace this line with your code")',
    ]
    assert out.splitlines()[:4] == INSIDE_A_FUNCTION.splitlines()[:4]  # the rest is kept


def test_a_top_level_span_sets_each_name_it_defines_to_ellipsis():
    source = (
        "x = torch.ones(3)\n"
        "### BEGIN SOLUTION\n"
        "jac = torch.eye(3)\n"
        "a, b = 1, 2\n"
        "def helper():\n"
        "    return 1\n"
        "### END SOLUTION\n"
        "ah.checks.check_tensor(jac, torch.eye(3))"
    )
    out = student_source(source, "nb, cell 1").splitlines()
    assert out == [
        "x = torch.ones(3)",
        "# YOUR CODE HERE",
        "jac = ...",
        "a = ...",
        "b = ...",
        "helper = ...",
        "ah.checks.check_tensor(jac, torch.eye(3))",
    ]


def test_several_spans_and_ipython_syntax_in_one_cell():
    source = (
        "%precision 3\n"
        "def f(x):\n"
        "    ### BEGIN SOLUTION\n"
        "    return x\n"
        "    ### END SOLUTION\n"
        "\n"
        "def g(x):\n"
        "    ### BEGIN SOLUTION\n"
        "    return 2 * x\n"
        "    ### END SOLUTION\n"
    )
    out = student_source(source, "nb, cell 1")
    assert out.count("raise NotImplementedError") == 2 and "return" not in out


def test_a_cell_without_markers_is_unchanged():
    assert student_source("print(1)\n", "nb, cell 0") == "print(1)\n"


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1\n",
        "x = 1\n### END SOLUTION\n",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n### END SOLUTION\n",
        "### END SOLUTION\nx = 1\n### BEGIN SOLUTION\n",
    ],
    ids=["no-end", "no-begin", "nested", "reversed"],
)
def test_unbalanced_markers_name_the_file_and_cell(source):
    with pytest.raises(StudentBuildError, match=r"07_demo.ipynb, cell 4: unbalanced"):
        student_source(source, "07_demo.ipynb, cell 4")


def test_a_span_directly_in_a_class_body_is_refused():
    source = "class A:\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION\n"
    with pytest.raises(StudentBuildError, match="class body"):
        student_source(source, "nb, cell 2")


def _notebook(tmp_path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), *cells]
    path = tmp_path / "demo.ipynb"
    nbformat.write(nb, path)
    return path


def test_build_clears_outputs_keeps_tags_and_marks_the_copy(tmp_path):
    code = nbformat.v4.new_code_cell(INSIDE_A_FUNCTION, execution_count=3)
    code.outputs = [nbformat.v4.new_output("stream", text="hi")]
    code.metadata["tags"] = ["raises-exception"]
    reference = _notebook(tmp_path, code)
    build_student_notebook(reference, tmp_path / "out" / "demo.ipynb")
    student = nbformat.read(tmp_path / "out" / "demo.ipynb", as_version=4)
    cell = student.cells[1]
    assert cell.outputs == [] and cell.execution_count is None
    assert cell.metadata["tags"] == ["raises-exception"]
    assert "solutions/demo.ipynb" in student.cells[0].source
    assert student.metadata["autograd_course"] == {"reference": "notebooks/demo.ipynb"}


def test_build_is_deterministic(tmp_path):
    reference = _notebook(tmp_path, nbformat.v4.new_code_cell(INSIDE_A_FUNCTION))
    build_student_notebook(reference, tmp_path / "a.ipynb")
    build_student_notebook(reference, tmp_path / "b.ipynb")
    assert (tmp_path / "a.ipynb").read_bytes() == (tmp_path / "b.ipynb").read_bytes()


def test_build_errors_name_the_notebook_and_cell(tmp_path):
    reference = _notebook(
        tmp_path,
        nbformat.v4.new_code_cell("print(1)"),
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1"),
    )
    with pytest.raises(StudentBuildError, match=r"demo.ipynb, cell 2: unbalanced"):
        build_student_notebook(reference, tmp_path / "out.ipynb")
    markdown = _notebook(tmp_path, nbformat.v4.new_markdown_cell("### BEGIN SOLUTION"))
    with pytest.raises(StudentBuildError, match="code cells only"):
        build_student_notebook(markdown, tmp_path / "out.ipynb")
