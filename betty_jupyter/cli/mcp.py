"""``betty mcp``: Betty's tools for an MCP client, over stdio, through a running Jupyter server with Betty; and
``betty mcp token add|list|revoke``: the credentials Betty issues to MCP clients.

``betty mcp`` takes only such a credential, from the environment (``$BETTY_MCP_TOKEN``): a command
line is visible to every user of the machine in ``ps``. It never reads the Jupyter server's token:
another agent never holds the person's credential. The ``mcp`` package is imported only when the
command serves (it is the optional extra ``betty-jupyter[mcp]``); without it, or with a release Betty does not
support, ``betty mcp`` says so in one line.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex

from ..agent.vocabulary import MODES
from ..errors import UsageError
from ..mcp_package import problem

TOKEN_VARIABLE = "BETTY_MCP_TOKEN"


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty mcp`` and ``betty mcp token``."""
    mcp = commands.add_parser("mcp", help="serve Betty's tools to an MCP client over stdio, through a running "
                              "Jupyter server with Betty; `betty mcp token` makes its credential (docs/mcp.md)")
    mcp.add_argument("--url", metavar="URL", help="the Jupyter server (default: the one the credential was made "
                     f"for, else $BETTY_SERVER_URL); the credential comes from ${TOKEN_VARIABLE}, never from the "
                     "command line")
    mcp.add_argument("--cluster", metavar="NAME", help="the cluster of the session it opens (default: the server's)")
    mcp.add_argument("--mode", choices=MODES, default=None,
                     help="the session's mode (default: the server's, confirm unless configured); "
                     "tier 2 asks a person in every mode")
    mcp.set_defaults(run=_mcp)
    token = mcp.add_subparsers(dest="mcp_command", metavar="token").add_parser(
        "token", help="the credentials Betty issues to MCP clients: add, list, revoke")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION")
    actions.required = True
    add = actions.add_parser("add", help="make a credential for one MCP client; it is printed once")
    add.add_argument("name", metavar="NAME", help="the client it is for, like claude-code")
    add.add_argument("--url", metavar="URL", help="the Jupyter server it is for (default: $BETTY_SERVER_URL, or "
                     "the one Jupyter server running as you)")
    add.set_defaults(run=_add)
    actions.add_parser("list", help="the credentials, with the server each is for").set_defaults(run=_list)
    revoke = actions.add_parser("revoke", help="forget a credential: it stops working at once")
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(run=_revoke)


def _site_allows_mcp() -> None:
    """SiteRefusal in one line when the site turned Betty's MCP face off (the server refuses it too)."""
    from ..config import site_policy  # lazy: traitlets and Jupyter's paths; `betty --help` needs neither

    site_policy().check_mcp()


def _mcp(args: argparse.Namespace) -> int:
    _site_allows_mcp()
    missing = problem("betty mcp")
    if missing is not None:
        raise UsageError(missing)
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise UsageError(f"set {TOKEN_VARIABLE} to a credential Betty issued for this client (betty mcp token add "
                         "NAME prints one); betty mcp never takes the Jupyter server's own token")
    from ..mcp_stdio import serve  # lazy: the mcp package (optional); only `betty mcp` needs it

    serve(args.url or os.environ.get("BETTY_SERVER_URL"), token, cluster=args.cluster, mode=args.mode)
    return 0


def _add(args: argparse.Namespace) -> int:
    _site_allows_mcp()
    from ..mcp_credentials import McpCredentials  # lazy: filelock and jupyter_core; `betty --help` needs neither

    credential, token = McpCredentials().add(args.name, args.url or os.environ.get("BETTY_SERVER_URL")
                                             or _running_server())
    endpoint = credential.server + "betty/mcp"
    print(f"MCP credential {credential.name!r} for {credential.server} (shown once; Betty keeps only its hash):\n"
          f"  {token}\n\n"
          "Claude Code over HTTP:\n"
          f"  claude mcp add --transport http betty {shlex.quote(endpoint)} "
          f"--header {shlex.quote('Authorization: Bearer ' + token)}\n"
          "Claude Code over stdio:\n"
          f"  claude mcp add betty --env {TOKEN_VARIABLE}={token} -- betty mcp\n\n"
          f"Any other client: the URL {endpoint} with the header 'Authorization: Bearer <credential>', or the "
          f"command `betty mcp` with {TOKEN_VARIABLE} in its environment. Revoke it with: "
          f"betty mcp token revoke {credential.name}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from ..mcp_credentials import McpCredentials  # lazy: filelock and jupyter_core; `betty --help` needs neither

    credentials = McpCredentials().listed()
    if not credentials:
        print("no MCP credentials; make one with: betty mcp token add NAME")
    for credential in credentials:
        made = datetime.datetime.fromtimestamp(credential.created).strftime("%Y-%m-%d %H:%M")
        print(f"{credential.name}\t{credential.server}\tmade {made}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from ..mcp_credentials import McpCredentials  # lazy: filelock and jupyter_core; `betty --help` needs neither

    gone = McpCredentials().revoke(args.name)
    print(f"revoked {gone.name!r}: it no longer opens {gone.server}betty/mcp")
    return 0


def _running_server() -> str:
    """The URL of the one Jupyter server running as this person; UsageError when there are none or several."""
    from jupyter_server.serverapp import list_running_servers  # lazy: only `betty mcp token add` looks

    from ..mcp_credentials import server_url  # lazy: as above

    urls = sorted({str(info["url"]) for info in list_running_servers()})
    if len(urls) != 1:
        found = f"found {', '.join(urls)}" if urls else "found none running"
        raise UsageError(f"say which Jupyter server the credential is for with --url URL ({found})")
    return server_url(urls[0])
