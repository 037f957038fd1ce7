"""A process whose event loop stopped in the middle of a request ends: AnyIO's worker thread is told to end.

The panel's own test (test_panel_shutdown.py) stops a real JupyterLab; this one is the same exit in a small
process: a request that got a worker thread from AnyIO and never ended, because the loop stopped under it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

CHILD = r'''
import asyncio
import anyio.to_thread
from betty_jupyter.server.shutdown import end_worker_threads_at_exit

loop = asyncio.new_event_loop()


async def request():
    await anyio.to_thread.run_sync(lambda: None)
    loop.stop()  # the server stops (Ctrl-C) while this request is still being answered
    await asyncio.Event().wait()


loop.create_task(request())
loop.run_forever()  # as Jupyter's server runs it: its request's task pending, the worker thread idle
end_worker_threads_at_exit()  # as Betty's server extension does when it loads (without it, this process never ends)
print("exiting", flush=True)
'''


def test_the_worker_thread_of_a_request_the_stopped_loop_never_finished_ends_with_the_process():
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, text=True, stdout=subprocess.PIPE)
    try:
        out, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the process still waits for AnyIO's worker thread 60 s after its last line")
    assert (child.returncode, out) == (0, "exiting\n")
