"""How the dev cluster holds jobs to --mem: read from small fake cgroup trees and Slurm versions.

The real enforcement is exercised by the dev cluster's OUT_OF_MEMORY tests (test_cluster_client,
test_delegation); these pin down the choice on machines this one is not.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from betty_jupyter.devcluster import configs
from betty_jupyter.devcluster.layout import DevClusterLayout
from betty_jupyter.devcluster.memory_limits import (
    Enforcement,
    MemoryEnforcement,
    can_create_cgroup,
    detect,
    for_slurm,
    polling,
    read_back,
)
from betty_jupyter.devcluster.packages import SlurmVersion, parse_slurm_version
from betty_jupyter.errors import DevClusterError

V1 = MemoryEnforcement(Enforcement.CGROUP_V1)
V2 = MemoryEnforcement(Enforcement.CGROUP_V2)
DEBIAN_12 = SlurmVersion(22, 5, 8)
DEBIAN_13 = SlurmVersion(24, 11, 5)


def tree(root: Path, files: dict[str, str]) -> Path:
    """A fake cgroup file system: each key a file under ``root``, each value its text."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def hybrid(root: Path) -> Path:
    """Debian 12 under systemd's hybrid layout: a tmpfs of v1 hierarchies, cgroup2 at unified/."""
    return tree(root, {
        "memory/memory.limit_in_bytes": "9223372036854771712\n",
        "memory/cgroup.procs": "1\n",
        "cpu/cpu.shares": "1024\n",
        "unified/cgroup.controllers": "hugetlb\n",
        "unified/cgroup.subtree_control": "",
    })


def unified(root: Path, controllers: str = "cpuset cpu io memory hugetlb pids rdma misc",
            subtree: str = "cpuset cpu io memory pids", container: bool = False, slice_: bool = True) -> Path:
    """The unified hierarchy at the root, as systemd mounts it (a container's root has cgroup.type)."""
    files = {"cgroup.controllers": f"{controllers}\n", "cgroup.subtree_control": f"{subtree}\n"}
    if container:
        files["cgroup.type"] = "domain\n"
    if slice_:
        files["system.slice/cgroup.type"] = "domain\n"
    return tree(root, files)


def never(_: Path) -> bool:
    """A cgroup file system where nothing can be created (mounted read-only)."""
    return False


# ----- detection ---------------------------------------------------------------------------


def test_a_writable_v1_memory_hierarchy_is_used(tmp_path):
    assert detect(hybrid(tmp_path), as_root=True) == V1


def test_a_read_only_v1_memory_hierarchy_falls_back_to_polling(tmp_path):
    assert detect(hybrid(tmp_path), as_root=True, can_create=never) == polling("cgroup v1 memory hierarchy is read-only")


def test_without_root_it_polls_whatever_the_tree(tmp_path):
    assert detect(hybrid(tmp_path / "v1"), as_root=False) == polling("not root")
    assert detect(unified(tmp_path / "v2"), as_root=False) == polling("not root")


def test_a_systemd_host_with_only_the_unified_hierarchy_uses_v2(tmp_path):
    assert detect(unified(tmp_path), as_root=True) == V2


def test_a_container_whose_parent_delegated_memory_uses_v2(tmp_path):
    assert detect(unified(tmp_path, container=True), as_root=True) == V2


def test_the_real_root_may_enable_memory_for_its_children_itself(tmp_path):
    assert detect(unified(tmp_path, subtree=""), as_root=True) == V2


def test_a_container_without_memory_delegated_polls(tmp_path):
    root = unified(tmp_path, subtree="pids", container=True)
    assert detect(root, as_root=True) == polling("cgroup v2 memory controller not delegated")


def test_v2_without_the_memory_controller_polls(tmp_path):
    root = unified(tmp_path, controllers="cpu io pids", subtree="cpu io pids")
    assert detect(root, as_root=True) == polling("cgroup v2 memory controller not available")


def test_v2_without_a_system_slice_polls(tmp_path):
    assert detect(unified(tmp_path, slice_=False), as_root=True) == polling("no system.slice in the cgroup v2 tree")


def test_a_read_only_v2_hierarchy_polls(tmp_path):
    assert detect(unified(tmp_path), as_root=True, can_create=never) == polling("cgroup v2 hierarchy is read-only")


def test_hybrid_with_memory_only_on_the_unified_mount_polls(tmp_path):
    # Slurm's cgroup/v2 refuses hybrid layouts, so memory on unified/ is of no use to it.
    root = tree(tmp_path, {"cpu/cpu.shares": "1024\n", "unified/cgroup.controllers": "memory pids\n"})
    assert detect(root, as_root=True) == polling("hybrid cgroups without a v1 memory hierarchy")


def test_a_machine_without_cgroups_polls(tmp_path):
    assert detect(tmp_path, as_root=True) == polling("no cgroup memory controller")


def test_the_creation_probe_leaves_nothing_behind(tmp_path):
    assert can_create_cgroup(tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert not can_create_cgroup(tmp_path / "missing")


def test_this_machine_is_read_without_leaving_anything_behind():
    root = Path("/sys/fs/cgroup")
    found = detect(root, as_root=os.geteuid() == 0)
    assert (found.reason == "") == found.uses_cgroups
    if os.geteuid() != 0:
        assert found == polling("not root")
    for directory in (root, root / "memory", root / "system.slice"):
        if directory.is_dir():
            assert not [name for name in os.listdir(directory) if name.startswith("betty-probe-")]


# ----- the Slurm version -------------------------------------------------------------------


@pytest.mark.parametrize(("text", "version"), [
    ("slurm-wlm 22.05.8\n", SlurmVersion(22, 5, 8)),
    ("slurm 24.11.5\n", SlurmVersion(24, 11, 5)),
    ("slurm 23.11.0-0rc1\n", SlurmVersion(23, 11, 0)),
])
def test_slurmd_versions_are_read(text, version):
    assert parse_slurm_version(text) == version
    assert str(version) in text


@pytest.mark.parametrize("text", ["", "slurmd: unknown option -- V\n", "slurm 24\n"])
def test_an_unreadable_version_is_one_clear_line(text):
    with pytest.raises(DevClusterError, match=r"not a Slurm version; reinstall the slurmd package$") as caught:
        parse_slurm_version(text)
    assert "\n" not in str(caught.value)


def test_a_slurm_before_22_05_cannot_use_v2_but_keeps_v1():
    assert for_slurm(V2, SlurmVersion(21, 8, 8)) == polling("Slurm 21.08.8 has no cgroup v2 support")
    assert for_slurm(V2, SlurmVersion(22, 5, 0)) == V2
    assert for_slurm(V1, SlurmVersion(21, 8, 8)) == V1


# ----- the files written -------------------------------------------------------------------


def test_v1_on_slurm_22_05_is_written_as_before():
    assert configs.cgroup_conf(V1, DEBIAN_12) == (
        "# Generated by `betty dev-cluster up`.\n"
        "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nCgroupAutomount=no\nConstrainRAMSpace=yes\n"
    )


@pytest.mark.parametrize(("version", "automount"), [
    (SlurmVersion(22, 5, 0), True),
    (SlurmVersion(23, 2, 8), True),
    (SlurmVersion(23, 11, 0), False),
    (DEBIAN_13, False),
])
def test_cgroup_automount_is_written_only_where_slurm_still_takes_it(version, automount):
    for enforcement in (V1, polling("not root")):
        lines = configs.cgroup_conf(enforcement, version).splitlines()
        assert ("CgroupAutomount=no" in lines) is automount
        assert not any(line.startswith(("IgnoreSystemd", "EnableControllers")) for line in lines)


def test_v2_on_slurm_24_11_ignores_systemd_and_enables_the_controllers():
    assert configs.cgroup_conf(V2, DEBIAN_13) == (
        "# Generated by `betty dev-cluster up`.\n"
        "CgroupPlugin=cgroup/v2\nCgroupMountpoint=/sys/fs/cgroup\nIgnoreSystemd=yes\nEnableControllers=yes\n"
        "ConstrainRAMSpace=yes\n"
    )


def test_v2_before_23_02_1_enables_the_controllers_with_cgroup_automount():
    for version in (DEBIAN_12, SlurmVersion(23, 2, 0)):
        lines = configs.cgroup_conf(V2, version).splitlines()
        assert lines[1:] == [
            "CgroupPlugin=cgroup/v2", "CgroupMountpoint=/sys/fs/cgroup", "IgnoreSystemd=yes",
            "CgroupAutomount=yes", "ConstrainRAMSpace=yes",
        ]
    assert "EnableControllers=yes" in configs.cgroup_conf(V2, SlurmVersion(23, 2, 1)).splitlines()


@pytest.mark.parametrize(("enforcement", "task_lines"), [
    (V1, ["TaskPlugin=task/cgroup"]),
    (V2, ["TaskPlugin=task/cgroup"]),
    (polling("not root"), ["TaskPlugin=task/none", "JobAcctGatherParams=OverMemoryKill"]),
])
def test_slurm_conf_chooses_the_task_plugin_and_is_read_back(tmp_path, enforcement, task_lines):
    layout = DevClusterLayout.load(tmp_path / "cluster", new_port_base=23000)
    slurm_conf = configs.slurm_conf(layout, enforcement)
    lines = slurm_conf.splitlines()
    assert f"# --mem is enforced by {enforcement}" in lines
    assert [line for line in lines if line.startswith(("TaskPlugin=", "JobAcctGatherParams="))] == task_lines
    for version in (DEBIAN_12, DEBIAN_13):
        assert read_back(slurm_conf, configs.cgroup_conf(enforcement, version)) == enforcement


def test_status_wording():
    assert str(V1) == "cgroup v1"
    assert str(V2) == "cgroup v2"
    assert str(polling("cgroup v2 memory controller not delegated")) == "polling (cgroup v2 memory controller not delegated)"


def test_a_config_from_before_the_reasons_reads_back_as_plain_polling():
    old = "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherParams=OverMemoryKill\n"
    assert read_back(old, "CgroupPlugin=cgroup/v1\n") == polling("")
    assert read_back("TaskPlugin=task/cgroup\n", "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n") == V1
