"""An OAuth-protected MCP server for the tests (the official SDK's MCPServer with its own
authorization server, which approves every request at once): `python -m
tests.e2e.mcp.mcp_auth_server http PORT` serves Streamable HTTP at /mcp, its OAuth endpoints and
its protected-resource metadata. Its tool `resources_asked` names the RFC 8707 resources
clients asked tokens for."""

from __future__ import annotations

import secrets
import sys
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

SCOPE = "tools"
ASKED: list[str | None] = []  # the resource of each authorization and token request


class ApprovingProvider:
    """An in-memory authorization server that approves every request at once."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.tokens: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        ASKED.append(params.resource)
        code = AuthorizationCode(
            code=secrets.token_hex(16),
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        ASKED.append(authorization_code.resource)
        token = AccessToken(
            token=secrets.token_hex(16),
            client_id=client.client_id or "",
            scopes=authorization_code.scopes,
            expires_at=int(time.time()) + 3600,
            resource=authorization_code.resource,
        )
        self.tokens[token.token] = token
        scope = " ".join(token.scopes)
        return OAuthToken(access_token=token.token, token_type="Bearer", scope=scope)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return None

    async def exchange_refresh_token(self, *args: object) -> OAuthToken:
        raise NotImplementedError

    async def revoke_token(self, *args: object) -> None:
        return None


def build(port: int) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    server = MCPServer(
        "loopwatch-test-auth",
        log_level="WARNING",
        auth_server_provider=ApprovingProvider(),
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
        ),
    )

    @server.tool(description="The resources clients asked tokens for, in order.")
    def resources_asked() -> list[str | None]:
        return list(ASKED)

    return server


if __name__ == "__main__":
    port = int(sys.argv[2])
    build(port).run("streamable-http", host="127.0.0.1", port=port)
