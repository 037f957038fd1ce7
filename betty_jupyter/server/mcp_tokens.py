"""The person's MCP credentials over REST, for the panel: list, add (the credential shown once), revoke.

Only the person's own Jupyter identity reaches these routes: an MCP credential is refused here as
on every route but ``/betty/mcp`` (Jupyter does not know it).
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ..mcp_credentials import McpCredential, McpCredentials
from .base import BettyHandler

CREDENTIALS = r"/betty/api/mcp/credentials"


def _shown(credential: McpCredential) -> dict[str, Any]:
    """A credential as the API shows it: never its hash."""
    return {"name": credential.name, "caller": credential.caller, "server": credential.server,
            "created": credential.created}


class CredentialsHandler(BettyHandler):
    """``GET mcp/credentials``: the credentials; ``POST mcp/credentials {name, server?}``: a new one."""

    @web.authenticated
    def get(self) -> None:
        """``{credentials: [McpCredentialInfo]}``, oldest first."""
        self.answer({"credentials": [_shown(credential) for credential in McpCredentials().listed()]})

    @web.authenticated
    def post(self) -> None:
        """201 ``{credential, token, endpoint}``: the clear credential, this once. 400 for a bad or taken name, or
        a server URL a credential may not be sent to; ``server`` defaults to this server as the request reached it."""
        self.services.config.site.check_mcp()  # 403 when the site turned the MCP face off
        body = self.body_object()
        name, server = body.get("name"), body.get("server")
        if not isinstance(name, str) or not (server is None or isinstance(server, str)):
            raise web.HTTPError(400, "send {\"name\": \"claude-code\"} (and, if need be, \"server\": its URL)")
        here = f"{self.request.protocol}://{self.request.host}{self.base_url}"
        credential, token = McpCredentials().add(name, server or here)
        self.answer({"credential": _shown(credential), "token": token,
                     "endpoint": credential.server + "betty/mcp"}, status=201)


class CredentialHandler(BettyHandler):
    """``DELETE mcp/credentials/{name}``: revoke one; it stops working at the client's next request, and the cards
    its calls left open are cancelled."""

    @web.authenticated
    def delete(self, name: str) -> None:
        """``{revoked: McpCredentialInfo, cancelled: [approval ids]}``; 400 when there is none of that name."""
        gone = McpCredentials().revoke(name)
        self.answer({"revoked": _shown(gone), "cancelled": self.services.revoked(gone.caller)})


handlers = [
    (CREDENTIALS, CredentialsHandler),
    (CREDENTIALS + r"/(?P<name>[^/]+)", CredentialHandler),
]
"""The MCP credential routes."""
