"""Connects to Redeem's MCP server with each client setup that docs/api.md ("Connecting a client")
gives, read from the page itself, and prints what each saw as one JSON object (MCPTests reads it).

Each snippet is read the way its client reads it: the URL, the header (with the client's own
variables filled in: mcp-remote's ${VAR} from "env", Cursor's ${env:VAR}, VS Code's ${input:id}
from "inputs", the shell's $VAR) and the transport it names. The documented address
(http://127.0.0.1:8080) is then pointed at the test stack's gateway, and the documented key
placeholder, or the variable, holds the test's key. The connection is the official MCP Python SDK's
Streamable HTTP client (1.x: the handshake revisions these clients speak), sending exactly those
headers.

usage: doc_clients.py DOC GATEWAY_URL KEY
"""
import asyncio
import json
import re
import shlex
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

doc_path, gateway, key = sys.argv[1:4]
DOCUMENTED = "http://127.0.0.1:8080"
PLACEHOLDER = "sk_live_…"
CLIENTS = ["Claude Desktop", "Claude Code", "Cursor", "VS Code"]


class Problem(Exception):
    pass


def section(text):
    start = text.index("### Connecting a client")
    end = text.index("\n## ", start)
    return text[start:end]


def snippet(text, client):
    """The first fenced block after the paragraph that starts with **client**: (language, body)."""
    at = text.find(f"**{client}**")
    if at < 0:
        raise Problem(f"no paragraph for {client}")
    m = re.compile(r"```(\w+)\n(.*?)```", re.S).search(text, at)
    if not m:
        raise Problem(f"no snippet for {client}")
    return m.group(1), m.group(2)


def header(line):
    """A `Name: value` header as mcp-remote and `claude mcp add` split it: at the first colon."""
    name, sep, value = line.partition(":")
    if not sep:
        raise Problem(f"not a header: {line!r}")
    return name.strip(), value.strip()


def claude_desktop(lang, body):
    if lang != "json":
        raise Problem("Claude Desktop's snippet is not JSON")
    server = json.loads(body)["mcpServers"]["redeem"]
    if server.get("command") != "npx":
        raise Problem("Claude Desktop runs the bridge with npx")
    args = [a for a in server["args"] if a != "-y"]
    if args[0] != "mcp-remote":
        raise Problem("Claude Desktop's bridge is mcp-remote")
    env = {k: v.replace(PLACEHOLDER, key) for k, v in server.get("env", {}).items()}
    url, headers, i = args[1], {}, 2
    while i < len(args):
        if args[i] == "--header":
            # mcp-remote fills ${VAR} from its environment, then splits the header at its first colon.
            filled = re.sub(r"\$\{([^}]+)\}", lambda m: env.get(m.group(1), ""), args[i + 1])
            name, value = header(filled)
            headers[name] = value
            i += 2
        elif args[i] in ("--allow-http", "--debug"):
            i += 1
        else:
            raise Problem(f"an mcp-remote argument this test does not know: {args[i]}")
    # mcp-remote's default transport, http-first, is Streamable HTTP.
    return url, headers, "streamable-http"


def claude_code(lang, body):
    if lang != "sh":
        raise Problem("Claude Code's snippet is not a shell command")
    words = shlex.split(body.strip().replace("$MCP_API_KEY", key).replace("${MCP_API_KEY}", key))
    if words[:3] != ["claude", "mcp", "add"]:
        raise Problem("Claude Code's snippet is not `claude mcp add`")
    transport, headers, rest, i = None, {}, [], 3
    while i < len(words):
        if words[i] in ("--transport", "-t"):
            transport = words[i + 1]
            i += 2
        elif words[i] in ("--header", "-H"):
            name, value = header(words[i + 1])
            headers[name] = value
            i += 2
        else:
            rest.append(words[i])
            i += 1
    if transport != "http" or len(rest) != 2 or rest[0] != "redeem":
        raise Problem(f"`claude mcp add --transport http redeem URL` expected, not {words}")
    return rest[1], headers, "streamable-http"


def cursor(lang, body):
    server = json.loads(body)["mcpServers"]["redeem"]
    if "command" in server or server.get("type", "streamableHttp") not in ("http", "streamableHttp"):
        raise Problem("Cursor's entry is a remote server by its url")
    env = {"MCP_API_KEY": key}
    headers = {
        k: re.sub(r"\$\{env:([^}]+)\}", lambda m: env.get(m.group(1), ""), v) for k, v in server["headers"].items()
    }
    return server["url"], headers, "streamable-http"


def vs_code(lang, body):
    config = json.loads(body)
    server = config["servers"]["redeem"]
    if server.get("type") != "http":
        raise Problem('VS Code names Streamable HTTP `"type": "http"`')
    inputs = {i["id"]: i for i in config.get("inputs", [])}

    def answer(m):
        asked = inputs.get(m.group(1))
        if not asked or asked.get("type") != "promptString" or not asked.get("password"):
            raise Problem(f"${{input:{m.group(1)}}} names no password prompt of inputs")
        return key

    headers = {k: re.sub(r"\$\{input:([^}]+)\}", answer, v) for k, v in server["headers"].items()}
    return server["url"], headers, "streamable-http"


async def connect(url, headers):
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            tools = await s.list_tools()
            listed = await s.call_tool("list_coupons", {"limit": 1})
            return {"protocolVersion": init.protocolVersion, "tools": len(tools.tools), "callFailed": listed.isError}


async def main():
    text = section(open(doc_path, encoding="utf-8").read())
    readers = {"Claude Desktop": claude_desktop, "Claude Code": claude_code, "Cursor": cursor, "VS Code": vs_code}
    out = []
    for client in CLIENTS:
        seen = {"client": client}
        try:
            url, headers, transport = readers[client](*snippet(text, client))
            seen.update(
                documentedUrl=url, transport=transport, headerNames=sorted(headers),
                sendsTheKey=headers.get("Authorization") == f"Bearer {key}")
            if not url.startswith(DOCUMENTED + "/"):
                raise Problem(f"{url} is not at {DOCUMENTED}")
            seen.update(await connect(gateway.rstrip("/") + url[len(DOCUMENTED):], headers))
        except Exception as e:  # reported, for the test to show
            seen["error"] = f"{type(e).__name__}: {e}"[:1000]
        out.append(seen)
    print(json.dumps({"clients": out}))


asyncio.run(main())
