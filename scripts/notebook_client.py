"""The papermill engine the run table executes its pages with: papermill's nbclient engine with two changes.

1. nbclient's stand-in for a front end's Output widget (``interact`` draws into one) keeps the outputs it captures
   but sends no ``comm_msg`` back to the kernel. That message goes out on the shell channel while the client is
   waiting for the cell's reply there, and now and then the next cell's execute request is then never delivered:
   the kernel sits idle, the client waits for the cell timeout (nbclient issue 312, open in nbclient 0.11). A page
   built without a live front end loses nothing: the kernel's copy of the widget's outputs is never read.
2. A cell the kernel has not started :data:`START_TIMEOUT` seconds after its request (no ``busy`` status for it) is
   an error naming the cell at once (:class:`CellNotStarted`), not a silent wait for the cell timeout.

``ENGINE`` is the name to give ``papermill.execute_notebook(..., engine_name=ENGINE)``; importing this module
registers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from nbclient.output_widget import OutputWidget
from nbclient.util import run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines
from papermill.log import logger

ENGINE = "fedlib-pages"
#: Seconds a cell may wait for the kernel to start it (an idle kernel starts a request at once).
START_TIMEOUT = 60


class CellNotStarted(RuntimeError):
    """The kernel did not start a cell within the start timeout after its execute request was sent."""


class _OutputWidgetNoSync(OutputWidget):
    def _publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys) -> None:
        return None  # no comm_msg to the kernel (see the module docstring)


class PageClient(PapermillNotebookClient):
    """papermill's notebook client with the Output widget that does not sync and the start timeout."""

    def __init__(self, nb_man, km=None, cell_start_timeout: float = START_TIMEOUT, **kw):
        super().__init__(nb_man, km=km, **kw)
        self.widget_registry = {"@jupyter-widgets/output": {"OutputModel": _OutputWidgetNoSync}}
        self.cell_start_timeout = cell_start_timeout

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        task = asyncio.ensure_future(super().async_execute_cell(cell, cell_index, execution_count, store_history))
        sent = time.monotonic()
        while not task.done() and "iopub.status.busy" not in cell.metadata.get("execution", {}):
            await asyncio.wait({task}, timeout=1.0)
            if not task.done() and time.monotonic() - sent > self.cell_start_timeout:
                task.cancel()  # nbclient turns the cancellation into its "kernel died" error: not the story here
                with contextlib.suppress(BaseException):
                    await task
                first = (cell.source.strip().splitlines() or [""])[0]
                raise CellNotStarted(
                    f"cell {cell_index} ({first[:60]}): the kernel did not start it within {self.cell_start_timeout} s "
                    f"of its execute request (the kernel is idle; the request was lost on its way)"
                )
        return await task

    execute_cell = run_sync(async_execute_cell)  # nbclient binds the synchronous wrapper to its own method


class PageEngine(NBClientEngine):
    """papermill's nbclient engine, executing with :class:`PageClient`."""

    @classmethod
    def execute_managed_notebook(
        cls,
        nb_man,
        kernel_name,
        log_output=False,
        stdout_file=None,
        stderr_file=None,
        start_timeout=60,
        execution_timeout=None,
        **kwargs,
    ):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("input_path", "timeout", "startup_timeout")}
        client = PageClient(
            nb_man,
            timeout=execution_timeout,
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log=logger,
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
            **kwargs,
        )
        return client.execute()


papermill_engines.register(ENGINE, PageEngine)
