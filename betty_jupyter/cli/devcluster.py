"""``betty dev-cluster up|down|status|env``: the one-node Slurm cluster on this machine."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .parser import Parser

if TYPE_CHECKING:
    from ..devcluster import DevCluster


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty dev-cluster`` and its actions."""
    dev = commands.add_parser(
        "dev-cluster",
        help="a real one-node Slurm cluster with an sshd on 127.0.0.1, for tests and the demo",
        description="Run a real one-node Slurm cluster (munge, MariaDB, slurmdbd, slurmctld, "
        "slurmd) and an OpenSSH server on 127.0.0.1 from Debian packages.",
    )
    dev.set_defaults(run=run)
    actions = dev.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    state_dir = argparse.ArgumentParser(add_help=False)
    state_dir.add_argument(
        "--state-dir", type=Path, default=None,
        help="where every generated file lives (default: $BETTY_DEV_CLUSTER_DIR or ~/.local/share/betty/dev-cluster)",
    )
    up = actions.add_parser("up", parents=[state_dir], help="start the cluster (a no-op when it already runs)")
    up.add_argument("--port-base", type=int, default=None,
                    help="first of five consecutive ports: slurmctld, slurmd, slurmdbd, MariaDB, sshd "
                    "(default: $BETTY_DEV_CLUSTER_PORT_BASE, else the ports last used, else 16817)")
    up.add_argument("--no-install", action="store_true", help="never install missing Debian packages")
    down = actions.add_parser("down", parents=[state_dir], help="stop exactly what `up` started")
    down.add_argument("--purge", action="store_true", help="also delete the state directory (jobs, accounting, keys)")
    status = actions.add_parser("status", parents=[state_dir], help="say what is running (exit 1 when not up)")
    status.add_argument("--json", action="store_true", help="one JSON object for scripts")
    env = actions.add_parser("env", parents=[state_dir], help="print the variables a shell or test needs")
    env.add_argument("--json", action="store_true", help="one JSON object for scripts")
    env.add_argument("--replace-config", action="store_true",
                     help="set BETTY_CONFIG to the dev cluster's even when your shell has its own (kept otherwise)")


def run(args: argparse.Namespace) -> int:
    """Carry out one ``betty dev-cluster`` action."""
    # lazy: the dev cluster's modules; only `betty dev-cluster` needs them
    from ..devcluster import DevCluster, default_port_base

    up = args.action == "up"
    # --port-base moves a stopped cluster; the environment only sets the ports of a new state directory.
    cluster = DevCluster(args.state_dir, port_base=args.port_base if up else None,
                         new_port_base=default_port_base() if up else None)
    if up:
        changed = cluster.up(install=not args.no_install)
        if not changed:
            print("dev cluster is already up", file=sys.stderr)
        _print_env(cluster, as_json=False)
        return 0
    if args.action == "down":
        stopped = cluster.down(purge=args.purge)
        print(f"stopped: {', '.join(stopped)}" if stopped else "dev cluster was not running", file=sys.stderr)
        return 0
    if args.action == "status":
        return _print_status(cluster, args.json)
    _print_env(cluster, as_json=args.json, replace_config=args.replace_config)
    return 0


def _print_status(cluster: DevCluster, as_json: bool) -> int:
    services = cluster.status()
    up = all(service.running for service in services)
    node = cluster.node_state()
    memory = cluster.memory_enforcement()
    if as_json:
        print(json.dumps({
            "up": up,
            "node_state": node,
            "memory_enforcement": memory.mode.value if memory else "unknown",
            "memory_enforcement_reason": (memory.reason or None) if memory else None,
            "services": {s.name: {"running": s.running, "pid": s.pid, "port": s.port} for s in services},
            "layout": cluster.layout.as_dict(),
        }, indent=2))
    else:
        for service in services:
            state = f"running (pid {service.pid})" if service.running else "stopped"
            port = f"port {service.port}" if service.port else ""
            print(f"{service.name:<10} {state:<22} {port}")
        print(f"node       {node or 'unknown'}")
        print(f"memory     {memory or 'unknown'}")
        print(f"state dir  {cluster.layout.root}")
    return 0 if up else 1


def _print_env(cluster: DevCluster, as_json: bool, replace_config: bool = False) -> None:
    env = cluster.layout.env()
    if as_json:
        print(json.dumps(env, indent=2))
        return
    for name, value in env.items():
        keep = name == "BETTY_CONFIG" and not replace_config
        print(_kept_export(name, value) if keep else f"export {name}={shlex.quote(value)}")


def _kept_export(name: str, value: str) -> str:
    """Shell that exports ``name`` as ``value`` unless the shell already has its own, saying so on stderr once."""
    quoted = shlex.quote(value)
    return (f'if [ -n "${{{name}:-}}" ] && [ "${name}" != {quoted} ]; then '
            f'echo "betty: keeping your {name}=${name} (betty dev-cluster env --replace-config sets the dev '
            f'cluster\'s)" >&2; else {name}={quoted}; fi; export {name}')


