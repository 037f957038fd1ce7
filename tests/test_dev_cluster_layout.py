"""Where the dev cluster keeps what every user's jobs must reach, whatever folder its state lies in."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from betty_jupyter.devcluster import DevClusterLayout


def test_a_state_directory_others_can_reach_keeps_slurmds_spool_inside() -> None:
    open_to_all = Path(tempfile.mkdtemp(prefix="betty-layout-", dir="/tmp"))  # /tmp: every user can pass through
    try:
        os.chmod(open_to_all, 0o755)
        layout = DevClusterLayout.load(open_to_all / "dev-cluster", new_port_base=23000)
        assert layout.slurmd_spool == open_to_all / "dev-cluster" / "spool" / "slurmd"
    finally:
        shutil.rmtree(open_to_all)


def test_a_state_directory_under_a_private_folder_keeps_slurmds_spool_where_jobs_reach_it(tmp_path: Path) -> None:
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    layout = DevClusterLayout.load(private / "dev-cluster", new_port_base=23000)
    spool = layout.slurmd_spool
    assert spool.parent.parent == Path("/var/tmp") and spool.name == "slurmd"
    assert spool == DevClusterLayout.load(private / "dev-cluster").slurmd_spool, "the same place every time"
    other = DevClusterLayout.load(private / "other-cluster", new_port_base=24000)
    assert other.slurmd_spool != spool, "two clusters never share a spool"
