"""Set-up shared by the book's notebooks: one call at the top of every page.

``setup()`` makes figures land in the notebook whatever the caller's environment says. A kernel started with
``MPLBACKEND=Agg`` in its environment (CI, a Makefile, a user's shell) would otherwise draw every ``plt.show()``
into nothing: Agg is a non-interactive backend, so the figure is neither shown nor stored as an output. Inside an
IPython kernel the inline backend is selected explicitly; outside one (a script, a test) nothing is changed.
"""

from __future__ import annotations

import re

#: The backend that stores figures as image outputs of the cell that drew them.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def in_kernel() -> bool:
    """True inside an IPython kernel (a notebook run by Jupyter, papermill or nbval), False elsewhere."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def setup(*, dpi: int = 100) -> None:
    """Prepare a notebook page: inline figures (whatever ``MPLBACKEND`` says), a fixed figure resolution, and
    pandas tables that show all their columns, rendered by :func:`frame_html` (no bare index, column names that
    wrap at their underscores, not letter by letter).

    Parameters
    ----------
    dpi : int
        Resolution of the figures stored in the notebook (matplotlib's ``figure.dpi``).
    """
    import matplotlib
    import pandas as pd

    if in_kernel():
        from IPython import get_ipython

        get_ipython().run_line_magic("matplotlib", "inline")
        # matplotlib-inline >= 0.2 registers itself under the short name "inline"
        if matplotlib.get_backend() not in (INLINE_BACKEND, "inline"):
            raise RuntimeError(
                f"repro.notebook.setup: matplotlib's backend is {matplotlib.get_backend()!r} "
                f"after %matplotlib inline; figures would not reach the notebook."
            )
    matplotlib.rcParams["figure.dpi"] = dpi
    if in_kernel():
        from IPython import get_ipython

        get_ipython().display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_colwidth", None)  # a claim or a note is shown whole, wrapped by the book's CSS
    pd.set_option("display.width", 200)


_HEADER_CELL = re.compile(r"(<th\b[^>]*>)(.*?)(</th>)", re.DOTALL)


def frame_html(frame) -> str:
    """A DataFrame as the book shows it: pandas' HTML table without the index when it is the default 0, 1, 2, ...
    (a reader learns nothing from it), and with a break opportunity (``<wbr>``) after each ``_`` and ``/`` of a
    header, so that a long column name wraps between its words instead of letter by letter (the book's style
    sheet breaks headers only there).

    Examples
    --------
    >>> import pandas as pd
    >>> html = frame_html(pd.DataFrame({"mean_entropy": [1.5]}))
    >>> "mean_<wbr>entropy" in html, "<th>0</th>" in html
    (True, False)
    """
    import pandas as pd

    bare = (
        isinstance(frame.index, pd.RangeIndex)
        and frame.index.name is None
        and frame.index.start == 0
        and frame.index.step == 1
    )
    html = frame.to_html(
        index=not bare,
        classes="fitted",
        border=0,
        max_rows=pd.get_option("display.max_rows"),
        max_cols=pd.get_option("display.max_columns"),
    )
    return _HEADER_CELL.sub(lambda m: m.group(1) + re.sub(r"([_/])", r"\1<wbr>", m.group(2)) + m.group(3), html)


# ---------------------------------------------------------------------------------------------------------------
# What a notebook's outputs hold: the checks of the book (scripts/screenshots.py, tests) count figures with these.

#: Output MIME types that are a picture.
IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg")
#: A code cell that calls one of these draws a figure that must end up in its outputs.
_DRAWS = re.compile(r"plt\.show\(\)|\bFrameSlider\(|\bdisplay\(\s*fig\b|\.savefig\(")
#: Cells whose figure lives in a live widget (rendered from the widget state, not the cell's outputs).
_LIVE_WIDGET = re.compile(r"\b(widgets\.)?interact(ive|_manual)?\(")
_IMG_TAG = re.compile(r"<img\b", re.IGNORECASE)


#: The glue key of a page's verdicts: the page's first cell pastes it under the title (``{glue} verdicts``).
VERDICTS_KEY = "verdicts"


def on_top(content, key: str = VERDICTS_KEY) -> None:
    """Hand ``content`` (a page's verdicts or findings, computed near its end: an HTML string or an IPython display
    object such as ``Markdown``) to the glue directive of the page's first cell (``{glue} key`` or, for Markdown,
    ``{glue:md} key``), so that the book shows it under the title. Where MyST-NB is not installed it is shown here."""
    from IPython.display import HTML, display

    content = HTML(content) if isinstance(content, str) else content
    try:
        from myst_nb import glue
    except ImportError:
        display(content)
        return
    glue(key, content, display=False)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def cell_images(cell) -> int:
    """Pictures in one cell's outputs: image outputs plus ``<img>`` tags of HTML outputs (the static sliders)."""
    count = 0
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        count += sum(kind in data for kind in IMAGE_TYPES)
        count += len(_IMG_TAG.findall(_text(data.get("text/html", ""))))
    return count


def draws_figure(cell) -> bool:
    """Whether a code cell's source draws a figure that should be among its outputs (live widgets excluded)."""
    if cell.get("cell_type") != "code":
        return False
    source = _text(cell.get("source", ""))
    return bool(_DRAWS.search(source)) and not _LIVE_WIDGET.search(source)


def shown_code_cells(nb) -> list[tuple[int, dict]]:
    """(index, cell) of the code cells the book renders: every code cell but those tagged ``remove-cell``."""
    return [
        (i, c)
        for i, c in enumerate(nb["cells"])
        if c.get("cell_type") == "code" and "remove-cell" not in c.get("metadata", {}).get("tags", [])
    ]


def missing_figures(nb) -> list[str]:
    """One line per cell that draws a figure but holds no picture: ``cell <index>: <first source line>``."""
    return [
        f"cell {i}: {_text(c['source']).strip().splitlines()[0][:80] if _text(c['source']).strip() else ''}"
        for i, c in enumerate(nb["cells"])
        if draws_figure(c) and cell_images(c) == 0
    ]


# ---------------------------------------------------------------------------------------------------------------
# The book's API reference page (notebooks/api.ipynb)


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n", 1)[0].split()) if doc else ""


def api_markdown(package) -> str:
    """The public API of ``package`` (its ``__all__``) as Markdown, generated from the docstrings: per name its kind,
    the module that defines it, its signature and the first paragraph of its docstring, with the whole docstring
    behind a toggle; then the subpackages with the first line of each module's docstring.

    Examples
    --------
    >>> import fedlib
    >>> text = api_markdown(fedlib)
    >>> "### `fedlib.make_selector" in text and "fedlib.selection.selectors" in text
    True
    """
    import html
    import inspect
    import pkgutil

    out = []
    for name in package.__all__:
        obj = getattr(package, name)
        if name == "__version__":
            out.append(f"### `{package.__name__}.__version__`\n\n`{obj!r}`\n")
            continue
        kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "constant"
        module = getattr(obj, "__module__", None) or package._API.get(name, package.__name__)
        try:
            signature = str(inspect.signature(obj)) if callable(obj) else ""
        except (TypeError, ValueError):
            signature = ""
        doc = inspect.getdoc(obj) if kind != "constant" else ""
        value = repr(obj) if kind == "constant" else ""
        value = f"`{value[:160]}{' ...' if len(value) > 160 else ''}`" if value else ""
        code = f"\n```python\n{name}{signature}\n```\n" if signature else ""
        out.append(
            f"### `{package.__name__}.{name}`\n{code}\n*{kind}*, defined in `{module}`. {value}"
            f"{html.escape(_first_paragraph(doc))}\n"
        )
        if doc and doc.strip() != _first_paragraph(doc):
            out.append(f"<details><summary>docstring</summary><pre>{html.escape(doc)}</pre></details>\n")
    out.append("## The subpackages\n")
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg:
            continue
        # read from the source, not imported: a subpackage of an optional extra is listed where it is not installed
        name = f"{package.__name__}.{info.name}"
        spec = info.module_finder.find_spec(name)
        out.append(f"### `{name}`\n\n{html.escape(_first_paragraph(_module_doc(spec.origin)))}\n")
        rows = []
        for mod in pkgutil.iter_modules(spec.submodule_search_locations):
            if mod.name.startswith("_"):
                continue
            origin = mod.module_finder.find_spec(f"{name}.{mod.name}").origin
            first = (_module_doc(origin).strip().splitlines() or [""])[0]
            rows.append(f"| `{name}.{mod.name}` | {html.escape(first).replace('|', '&#124;')} |")
        out.append("| module | what it holds |\n|---|---|\n" + "\n".join(rows) + "\n")
    return "\n".join(out)


def _module_doc(path: str) -> str:
    """A module's docstring, read from its source (the module is not imported)."""
    import ast
    from pathlib import Path

    return ast.get_docstring(ast.parse(Path(path).read_text())) or ""
