"""A small MCP server on the official Python SDK (PyPI `mcp`, its `MCPServer`), for the hop
test: its one tool, `deploy`, cannot finish without a region, so on protocol 2026-07-28
its first answer is `input_required` with one form elicitation ("which region?", a
string field) and a requestState; the retry brings the answer and the echoed state, and
the tool returns a result built from them.

    python hop_server.py     serves Streamable HTTP (stateless, JSON answers) at /mcp on
                             127.0.0.1, on a free port; prints
                             `hop server: listening on http://127.0.0.1:PORT` on stderr,
                             and answers `GET /healthz`
"""

from __future__ import annotations

import asyncio
import socket
import sys

import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

QUESTION = "Which region should the deployment go to?"
# What this server puts in its round's requestState. The SDK seals it on the way out and
# checks the seal on the way back, so the tool reads only what it wrote.
STATE = "asked:region"

server = MCPServer("hop-region-server")


class Deployment(BaseModel):
    service: str
    region: str
    deployed: bool


@server.tool(description="Deploys a service to the region its caller names when asked")
async def deploy(service: str, ctx: Context) -> Deployment | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("region")
    if answer is None:
        return types.InputRequiredResult(
            input_requests={
                "region": types.ElicitRequest(
                    params=types.ElicitRequestFormParams(
                        message=QUESTION,
                        requested_schema={
                            "type": "object",
                            "properties": {"region": {"type": "string", "title": "Region"}},
                            "required": ["region"],
                        },
                    )
                )
            },
            request_state=STATE,
        )
    if ctx.request_state != STATE:
        raise ValueError(f"the retry's requestState is not this server's: {ctx.request_state!r}")
    if not isinstance(answer, types.ElicitResult):
        raise ValueError(f"the answer to region is not an elicitation result: {answer!r}")
    if answer.action != "accept":
        raise ValueError(f"the caller answered {answer.action} to {QUESTION!r}")
    region = (answer.content or {}).get("region")
    if not isinstance(region, str) or not region:
        raise ValueError(f"the answer to {QUESTION!r} has no region: {answer.content!r}")
    return Deployment(service=service, region=region, deployed=True)


async def healthz(_: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def main() -> None:
    app = server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1")
    app.router.routes.append(Route("/healthz", healthz))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    print(f"hop server: listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    await uv.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
