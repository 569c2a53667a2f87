"""Drives Redeem's MCP server with the official MCP Python SDK (PyPI `mcp`), 1.x or 2.x, whichever
the interpreter running this has, and prints what it saw as one JSON object (MCPTests reads it).
Every tool's outputSchema is checked here with `jsonschema` (a dependency of the SDK): each result
that is not an error must validate against its tool's schema, and what does not is listed in
"outputErrors".

usage: mcp_client.py URL ADMIN_KEY READONLY_KEY NEW_CODE REDEEMED_CODE MODE
MODE: auto (2.x: server/discover, the 2026-07-28 revision) or legacy (the initialize handshake).
"""
import asyncio
import json
import sys
from importlib.metadata import version

import jsonschema

url, admin, readonly, new_code, redeemed_code, mode = sys.argv[1:7]
sdk = version("mcp")


def summary(result):
    text = "".join(getattr(c, "text", "") for c in result.content)
    structured = getattr(result, "structuredContent", None)
    if structured is None:
        structured = getattr(result, "structured_content", None)
    is_error = getattr(result, "isError", None)
    if is_error is None:
        is_error = getattr(result, "is_error", False)
    return {"isError": bool(is_error), "structured": structured, "text": text}


def output_schema(tool):
    schema = getattr(tool, "outputSchema", None)
    return schema if schema is not None else getattr(tool, "output_schema", None)


async def session_calls(call_tool, list_tools, protocol_version, key_role):
    out = {"sdk": sdk, "protocolVersion": protocol_version, "outputErrors": [], "validated": []}
    tools = await list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    schemas = {t.name: output_schema(t) for t in tools.tools}
    out["outputSchemaTypes"] = {name: (s or {}).get("type") for name, s in schemas.items()}

    async def call(name, arguments):
        result = await call_tool(name, arguments)
        seen = summary(result)
        if not seen["isError"]:
            try:
                jsonschema.validate(seen["structured"], schemas[name])
                out["validated"].append(name)
            except Exception as e:  # the schema is missing, broken, or does not fit the result
                out["outputErrors"].append(f"{name}: {type(e).__name__}: {e}"[:2000])
        return result
    schema = next(t for t in tools.tools if t.name == "create_coupon")
    out["createSchema"] = getattr(schema, "inputSchema", None) or getattr(schema, "input_schema", None)
    if key_role == "readonly":
        out["readonlyCreate"] = summary(await call("create_coupon", {"code": new_code + "-RO", "kind": "freePeriod",
                                                                     "duration": {"unit": "day", "count": 1}}))
        out["readonlyList"] = summary(await call("list_coupons", {"limit": 5}))
        return out
    out["dryRunStoreLimit"] = summary(await call("create_coupon", {
        "code": new_code + "-IOS", "kind": "percentOff", "percentOff": 20, "productIds": ["pro.monthly"], "platforms": ["ios"],
        "duration": {"unit": "month", "count": 1}, "periodCount": 1, "dry_run": True}))
    out["created"] = summary(await call("create_coupon", {"code": new_code, "kind": "freePeriod", "duration": {"unit": "month", "count": 1},
                                                          "maxRedemptions": 10}))
    out["again"] = summary(await call("create_coupon", {"code": new_code, "kind": "freePeriod", "duration": {"unit": "month", "count": 1}}))
    out["updated"] = summary(await call("update_coupon", {"code": new_code, "maxRedemptions": 7}))
    out["got"] = summary(await call("get_coupon", {"code": new_code}))
    out["redemptions"] = summary(await call("list_redemptions", {"code": redeemed_code}))
    rows = (out["redemptions"]["structured"] or {}).get("data") or []
    if rows:
        out["redemption"] = summary(await call("get_redemption", {"id": rows[0]["redemptionId"]}))
    out["export"] = summary(await call("export_redemptions_csv", {"code": redeemed_code}))
    out["offers"] = summary(await call("list_store_offers", {"code": new_code}))
    out["codes"] = summary(await call("create_codes", {"code": new_code, "count": 3}))
    out["deactivated"] = summary(await call("deactivate_coupon", {"code": new_code}))
    out["missing"] = summary(await call("get_coupon", {"code": "NO-SUCH-CODE-X"}))
    return out


async def run(key, key_role):
    headers = {"Authorization": f"Bearer {key}"}
    if sdk.startswith("1."):
        from mcp import ClientSession
        from mcp.client.streamable_http import streamablehttp_client
        async with streamablehttp_client(url, headers=headers) as (read, write, get_session_id):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                out = await session_calls(s.call_tool, s.list_tools, init.protocolVersion, key_role)
                out["sessionId"] = get_session_id()
                return out
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            return await session_calls(c.call_tool, c.list_tools, c.protocol_version, key_role)


async def main():
    result = {"admin": await run(admin, "admin"), "readonly": await run(readonly, "readonly")}
    print(json.dumps(result, default=str))


asyncio.run(main())
