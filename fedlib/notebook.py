"""Set-up shared by the book's notebooks: one call at the top of every page.

``setup()`` makes figures land in the notebook whatever the caller's environment says. A kernel started with
``MPLBACKEND=Agg`` in its environment (CI, a Makefile, a user's shell) would otherwise draw every ``plt.show()``
into nothing: Agg is a non-interactive backend, so the figure is neither shown nor stored as an output. Inside an
IPython kernel the inline backend is selected explicitly; outside one (a script, a test) nothing is changed.
"""
from __future__ import annotations

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
    pandas tables that show all their columns.

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
        if matplotlib.get_backend() != INLINE_BACKEND:
            raise RuntimeError(f"fedlib.notebook.setup: matplotlib's backend is {matplotlib.get_backend()!r} "
                               f"after %matplotlib inline; figures would not reach the notebook.")
    matplotlib.rcParams["figure.dpi"] = dpi
    pd.set_option("display.max_columns", None)
    pd.set_option("display.width", 200)
