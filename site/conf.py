"""Sphinx configuration of the course's website (``make site``; ``tools/site.py`` drives it).

The chapters are the committed notebooks, never re-executed: myst-nb renders their stored
outputs. Every script and font the pages load comes from the site itself (``_static``):
MathJax and Mermaid are copied there from the npm registry's pinned packages, so a reader's
browser asks no other host for anything.
"""

from __future__ import annotations

project = "PyTorch autograd, inside out"
author = "the course's authors"
copyright = "the course's authors, MIT licence"

extensions = ["myst_nb", "sphinxcontrib.mermaid"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
root_doc = "index"

# Notebooks: stored outputs only, and every warning is an error (sphinx-build -W).
nb_execution_mode = "off"
nb_render_markdown_format = "myst"  # Mermaid graphs arrive as {mermaid} directives
nb_merge_streams = True
nb_render_error_lexer = "pytb"  # IPython's own lexer stumbles on a backtick in a message
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# MathJax and Mermaid from the site itself (tools/site.py copies them into _static).
mathjax_path = "mathjax/tex-chtml.js"
mathjax3_config = {"chtml": {"fontURL": "_static/mathjax/output/chtml/fonts/woff-v2"}}
mermaid_use_local = "mermaid/mermaid.esm.min.mjs"
mermaid_fullscreen = False
mermaid_init_config = {"startOnLoad": False, "securityLevel": "strict"}

html_theme = "sphinx_book_theme"
html_title = project
html_favicon = "_static/favicon.svg"  # a nabla; without one, every page asks for /favicon.ico
html_static_path = ["_static"]
html_extra_path = ["_extra"]  # downloads/: the course bundle, the notebooks, the wheel
html_css_files = ["course.css"]
html_js_files = ["course.js"]  # the sidebar toggles work (see the script)
html_last_updated_fmt = None  # no dates: two builds give the same HTML
html_show_sourcelink = False
html_copy_source = False
html_context = {"default_mode": "light"}  # an empty mode is a console error in the theme
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_source_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
