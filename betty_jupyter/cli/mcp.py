"""``betty mcp``: Betty's tools for an MCP client, over stdio, through a running Jupyter server with Betty.

The token comes only from the environment (``$BETTY_SERVER_TOKEN`` or ``$JUPYTER_TOKEN``): a
command line is visible to every user of the machine in ``ps``. The ``mcp`` package is imported
only when the command runs (it is the optional extra ``betty-jupyter[mcp]``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from ..agent.vocabulary import MODES
from ..errors import UsageError


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty mcp``."""
    mcp = commands.add_parser("mcp", help="serve Betty's tools to an MCP client over stdio, through a running "
                              "Jupyter server with Betty (docs/mcp.md)")
    mcp.add_argument("--url", metavar="URL", help="the Jupyter server (default: $BETTY_SERVER_URL); its token comes "
                     "from $BETTY_SERVER_TOKEN or $JUPYTER_TOKEN, never from the command line")
    mcp.add_argument("--cluster", metavar="NAME", help="the cluster of the session it opens (default: the server's)")
    mcp.add_argument("--mode", choices=MODES, default=None,
                     help="the session's mode (default: the server's, confirm unless configured); "
                     "tier 2 asks a person in every mode")
    mcp.set_defaults(run=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("betty mcp needs the MCP package: pip install 'betty-jupyter[mcp]'")
    url = args.url or os.environ.get("BETTY_SERVER_URL")
    if not url:
        raise UsageError("betty mcp talks to a running Jupyter server with Betty: "
                         "give its URL with --url or $BETTY_SERVER_URL")
    token = os.environ.get("BETTY_SERVER_TOKEN") or os.environ.get("JUPYTER_TOKEN")
    if not token:
        raise UsageError("set BETTY_SERVER_TOKEN (or JUPYTER_TOKEN) to the Jupyter server's token; "
                         "betty mcp reads it only from the environment")
    from ..mcp_stdio import serve  # lazy: the mcp package (optional); only `betty mcp` needs it

    serve(url, token, cluster=args.cluster, mode=args.mode)
    return 0
