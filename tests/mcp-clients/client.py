"""The official Python MCP SDK (PyPI `mcp`) driving a parkway tool over Streamable HTTP.

The client speaks protocol 2026-07-28 (no handshake: every request carries its version,
capabilities and client info) and declares elicitation through its callback. The tool
`release` (targets.json) asks its caller twice, each ask one `input_required` round.

    python client.py rounds URL             list the tools, call `release`; the SDK answers
                                            both rounds through the elicitation callback
    python client.py first URL STATE_FILE   call `release` in manual mode; keep the first
                                            round (its requests and requestState) in STATE_FILE
    python client.py resume URL STATE_FILE  after the server was killed and started again:
                                            answer the kept round through the same callback,
                                            retry with the kept requestState; the SDK answers
                                            the second round; the result must be whole
    python client.py remote URL             call the hop server's own tool `deploy` (hop_server.py)
                                            directly: one round, then its result
    python client.py hop URL                call `hop_region` (hop-targets.json): the question
                                            of the MCP server the run calls comes to this client

Every check raises on failure; the script exits non-zero with the reason.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

VERSION = "2026-07-28"
ARGUMENTS = {"service": "api", "version": "1.4.2"}
EXPECTED = {"service": "api", "version": "1.4.2", "go": True, "channel": "beta"}
RUN = "io.parkway/run"


def check(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)


class Person:
    """Answers the questions the way a person at the client would, and remembers them."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        check(isinstance(params, types.ElicitRequestFormParams), f"a form elicitation, got {params!r}")
        message = params.message
        schema = dict(params.requested_schema)
        self.asked.append(message)
        print(f"  elicitation: {message!r} schema={json.dumps(schema, sort_keys=True)}")
        answer = schema.get("properties", {}).get("answer", {})
        if message == "Release api 1.4.2?":
            check(answer.get("type") == "boolean", f"the confirm ask wants a boolean: {schema}")
            return types.ElicitResult(action="accept", content={"answer": True})
        if message == "Which channel for api?":
            check(answer.get("enum") == ["stable", "beta", "nightly"], f"the select ask offers its options: {schema}")
            return types.ElicitResult(action="accept", content={"answer": "beta"})
        if message == "Which region should the deployment go to?":
            region = schema.get("properties", {}).get("region", {})
            check(region.get("type") == "string", f"the remote server asks for a string region: {schema}")
            return types.ElicitResult(action="accept", content={"region": "eu-west-1"})
        raise AssertionError(f"a question this client was not told about: {message!r}")


def client(url: str, person: Person) -> Client:
    # mode pins 2026-07-28 (no probe, no fallback to the 2025 handshake); the response
    # cache is off so that every call reaches the server.
    return Client(url, mode=VERSION, elicitation_callback=person.elicit, cache=None, read_timeout_seconds=30)


def structured(result: types.CallToolResult) -> Any:
    check(not result.is_error, f"the call failed: {result.content}")
    return result.structured_content


async def rounds(url: str) -> None:
    person = Person()
    async with client(url, person) as c:
        check(c.protocol_version == VERSION, f"negotiated {c.protocol_version}")
        tools = await c.list_tools()
        names = [t.name for t in tools.tools]
        print(f"  tools: {names}")
        check(names == ["release"], f"the tools listed: {names}")
        check(tools.tools[0].input_schema.get("required") == ["service", "version"], "the input schema")
        # The SDK runs both rounds inside call_tool: each input_required answer goes to
        # the elicitation callback, and the call is retried with inputResponses and the
        # echoed requestState.
        result = await c.call_tool("release", ARGUMENTS)
        got = structured(result)
        print(f"  result: {json.dumps(got, sort_keys=True)}")
        check(got == EXPECTED, f"the result: {got}")
        check(person.asked == ["Release api 1.4.2?", "Which channel for api?"], f"the questions: {person.asked}")
        check(bool((result.meta or {}).get(RUN)), f"the result names its run: {result.meta}")


async def first(url: str, state_file: str) -> None:
    person = Person()
    async with client(url, person) as c:
        # Manual mode: the round is handed back instead of answered.
        round1 = await c.session.call_tool("release", ARGUMENTS, allow_input_required=True)
        check(isinstance(round1, types.InputRequiredResult), f"a round, got {round1!r}")
        keys = list(round1.input_requests or {})
        print(f"  round 1: keys={keys} requestState={len(round1.request_state or '')} bytes")
        check(keys == ["go"], f"the first round asks the confirm, keyed by its payload: {keys}")
        check(bool(round1.request_state), "the round has a requestState")
        with open(state_file, "w") as f:
            f.write(round1.model_dump_json(by_alias=True, exclude_none=True))
    check(person.asked == [], "nothing was answered yet")


async def resume(url: str, state_file: str) -> None:
    person = Person()
    with open(state_file) as f:
        kept = types.InputRequiredResult.model_validate_json(f.read())
    run = (kept.meta or {}).get(RUN)
    check(bool(run), f"the kept round names its run: {kept.meta}")
    async with client(url, person) as c:
        # The kept round's requests go through the SDK's own dispatch, to the callback.
        responses: types.InputResponses = {}
        for key, request in (kept.input_requests or {}).items():
            context = ClientRequestContext(session=c.session, request_id=key, meta=None)
            response = await c.session.dispatch_input_request(context, request)
            check(not isinstance(response, types.ErrorData), f"the callback answered {key}: {response}")
            responses[key] = response
        # Seeded with the kept answers and state, call_tool drives the second round itself.
        result = await c.call_tool(
            "release", ARGUMENTS, input_responses=responses, request_state=kept.request_state
        )
        got = structured(result)
        print(f"  result after the restart: {json.dumps(got, sort_keys=True)}")
        check(got == EXPECTED, f"the result: {got}")
        check(person.asked == ["Release api 1.4.2?", "Which channel for api?"], f"the questions: {person.asked}")
        check((result.meta or {}).get(RUN) == run, f"the same run {run} ended: {result.meta}")


async def remote(url: str) -> None:
    person = Person()
    async with client(url, person) as c:
        tools = await c.list_tools()
        check([t.name for t in tools.tools] == ["deploy"], f"the hop server's tools: {tools.tools}")
        first = await c.session.call_tool("deploy", {"service": "api"}, allow_input_required=True)
        check(isinstance(first, types.InputRequiredResult), f"the hop server asks first, got {first!r}")
        check(list(first.input_requests or {}) == ["region"], f"one request, keyed region: {first.input_requests}")
        check(bool(first.request_state), "the hop server's round has a requestState")
        result = await c.call_tool("deploy", {"service": "api"})
        got = structured(result)
        print(f"  hop server's result: {json.dumps(got, sort_keys=True)}")
        check(got == {"service": "api", "region": "eu-west-1", "deployed": True}, f"the result: {got}")
        check(person.asked == ["Which region should the deployment go to?"], f"the questions: {person.asked}")


async def hop(url: str) -> None:
    person = Person()
    async with client(url, person) as c:
        result = await c.call_tool("hop_region", {"service": "api"})
        got = structured(result)
        print(f"  result through the hop: {json.dumps(got, sort_keys=True)}")
        check(person.asked == ["Which region should the deployment go to?"], f"the questions: {person.asked}")
        check(got == {"service": "api", "remote": {"service": "api", "region": "eu-west-1", "deployed": True}}, f"the result: {got}")


def main(argv: list[str]) -> None:
    match argv:
        case ["rounds", url]:
            asyncio.run(rounds(url))
        case ["first", url, state_file]:
            asyncio.run(first(url, state_file))
        case ["resume", url, state_file]:
            asyncio.run(resume(url, state_file))
        case ["remote", url]:
            asyncio.run(remote(url))
        case ["hop", url]:
            asyncio.run(hop(url))
        case _:
            sys.exit(f"usage: {sys.argv[0]} rounds URL | first URL STATE_FILE | resume URL STATE_FILE | remote URL | hop URL")
    print(f"python client: {argv[0]}: ok")


if __name__ == "__main__":
    main(sys.argv[1:])
