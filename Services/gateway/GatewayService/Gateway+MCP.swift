import Core
import Foundation
import HTTP

/// The MCP server at `/mcp`: Streamable HTTP in both revisions clients speak.
/// - **2026-07-28**: every POST carries `MCP-Protocol-Version` (and `Mcp-Method`, `Mcp-Name`), which
///   must agree with the body; no session or handshake; `server/discover` answers what the server
///   speaks; every result carries `resultType`.
/// - **2025-11-25** (and the handshake revisions before it): `initialize` negotiates a version and
///   answers an `Mcp-Session-Id`, which the client sends back. The server keeps no session state:
///   every request carries its own credential, so any gateway instance answers any request.
///
/// Every request needs a bearer credential, with the API's role rules: each tool runs its route
/// (`MCPTool`) with the caller's own `Authorization`, so a refusal is the API's, returned as a tool
/// result with `isError` and the API's machine code, never a protocol error.
extension Gateway {
    /// A JSON-RPC message as it arrives.
    struct MCPMessage: APIBody {
        static let schemaName: String? = "JSONRPCMessage"
        var jsonrpc: String
        var id: JSONValue?
        var method: String?
        var params: [String: JSONValue]?
    }

    static let mcpRoutes: [APIRoute] = [
        .route(.post, "/mcp", "The MCP server (Streamable HTTP, revisions 2026-07-28 and 2025-11-25); needs a bearer API key",
               access: mcpAccess, answers: [200: .json(MCPMessage.self), 202: .empty], errors: [400, 422], handle: Gateway.mcp),
        .route(.delete, "/mcp", "Ends an MCP session of the 2025-11-25 revision (the server keeps none, so this only answers)",
               answers: [204: .empty], handle: Gateway.endMCPSession),
    ]

    /// Any API key or member, as the API's readonly routes, in its app (a key's own, or the one a
    /// member's `Redeem-App` names): each tool's route scopes what it reads and changes by that
    /// app, as over HTTP. A refusal says `WWW-Authenticate: Bearer`
    /// and no more: there is no authorization server, so no protected-resource metadata (RFC 9728)
    /// is advertised, and a client does not try OAuth; it sends the key it was configured with.
    static let mcpAccess = Access<Authenticator.Key>(requirement: .key(.readonly)) { auth, request in
        do {
            return try await auth.requireRole(request, .readonly, anyApp: true)
        } catch let e as ServiceError where e.code == .notIdentified {
            throw HTTPError(
                401, e.code.rawValue, "send an API key as a bearer token", headers: [("WWW-Authenticate", "Bearer")])
        } catch let e as ServiceError where e.code == .invalidToken {
            throw HTTPError(
                401, e.code.rawValue, e.message, headers: [("WWW-Authenticate", "Bearer error=\"invalid_token\"")])
        } catch let e as ServiceError where e.code == .forbidden {
            throw HTTPError(
                403, e.code.rawValue, "only an API key or a member may use the MCP server",
                headers: [("WWW-Authenticate", "Bearer error=\"insufficient_scope\"")])
        }
    }

    static let mcpModernVersions = ["2026-07-28"]
    static let mcpHandshakeVersions = ["2025-11-25", "2025-06-18", "2025-03-26"]
    static let mcpInstructions =
        "Redeem's coupon tools: list, read, create (dry_run checks store limits), change and deactivate coupons; "
        + "read and export their redemptions; make unique codes (create_codes answers a one-time download address "
        + "for a person, never the codes), as export_redemptions_csv does for the redemptions. "
        + "Each tool answers what the HTTP API answers, with the same error codes."

    /// The address of this gateway as the caller reached it (for download addresses and the Origin check).
    static func origin(_ req: HTTPRequest) -> String {
        let host = req.header("host").flatMap { h in !h.isEmpty && h.allSatisfy({ $0.isLetter || $0.isNumber || ".-:[]".contains($0) }) ? h : nil }
            ?? "localhost"
        let bare = host.hasPrefix("[") ? String(host.prefix { $0 != "]" }.dropFirst()) : String(host.prefix { $0 != ":" })
        return (["localhost", "127.0.0.1", "::1"].contains(bare.lowercased()) ? "http://" : "https://") + host
    }

    func endMCPSession(_ req: HTTPRequest) async throws -> HTTPResponse { .noContent() }

    func mcp(_ req: HTTPRequest, _ caller: Authenticator.Key, _ body: Incoming<MCPMessage>) async throws -> HTTPResponse {
        // A browser page of another site must not drive the server with a user's credential.
        if let origin = req.header("origin"), origin != "null", URL(string: origin)?.host.map({ Self.origin(req).hasSuffix("://" + $0) || Self.origin(req).contains("://" + $0 + ":") }) != true {
            throw HTTPError(403, "forbidden", "this Origin may not use the MCP server")
        }
        let message = try body.read()
        guard message.jsonrpc == "2.0" else { return Self.rpcError(200, id: message.id, code: -32600, "jsonrpc must be 2.0") }
        guard let method = message.method else { return HTTPResponse(status: 202) }  // a response to us: we send no requests
        guard let id = message.id else { return HTTPResponse(status: 202) }  // a notification

        let header = req.header("mcp-protocol-version")
        let modern = header.map(Self.mcpModernVersions.contains) ?? false
        if let header, !modern, !Self.mcpHandshakeVersions.contains(header) {
            return Self.rpcError(400, id: id, code: -32022, "unsupported protocol version \(header)",
                                 data: .object(["supported": .array((Self.mcpModernVersions + Self.mcpHandshakeVersions).map(JSONValue.string)),
                                                "requested": .string(header)]))
        }
        if modern, let header {
            guard case .object(let meta)? = message.params?["_meta"], meta["io.modelcontextprotocol/protocolVersion"] != nil else {
                return Self.rpcError(400, id: id, code: -32602, "params._meta must carry io.modelcontextprotocol/protocolVersion and clientCapabilities")
            }
            guard meta["io.modelcontextprotocol/protocolVersion"] == .string(header) else {
                return Self.rpcError(400, id: id, code: -32020, "MCP-Protocol-Version does not match the request's protocol version")
            }
            guard req.header("mcp-method") == method else {
                return Self.rpcError(400, id: id, code: -32020, "Mcp-Method does not match the request's method")
            }
            if method == "tools/call", let name = req.header("mcp-name"), case .string(let tool)? = message.params?["name"], name != tool {
                return Self.rpcError(400, id: id, code: -32020, "Mcp-Name does not match the tool's name")
            }
        }

        var headers: [(String, String)] = []
        let result: JSONValue
        switch method {
        case "initialize":
            let asked: String? = if case .string(let v)? = message.params?["protocolVersion"] { v } else { nil }
            let version = asked.flatMap { Self.mcpHandshakeVersions.contains($0) ? $0 : nil } ?? Self.mcpHandshakeVersions[0]
            headers.append(("Mcp-Session-Id", "mcp-" + UUID.random().lowercasedString))
            result = .object([
                "protocolVersion": .string(version),
                "capabilities": .object(["tools": .object(["listChanged": .bool(false)])]),
                "serverInfo": Self.serverInfo,
                "instructions": .string(Self.mcpInstructions),
            ])
        case "server/discover":
            result = .object([
                "supportedVersions": .array((Self.mcpModernVersions + Self.mcpHandshakeVersions).map(JSONValue.string)),
                "capabilities": .object(["tools": .object(["listChanged": .bool(false)])]),
                "serverInfo": Self.serverInfo,
                "instructions": .string(Self.mcpInstructions),
                "ttlMs": .number(0), "cacheScope": .string("private"),
            ])
        case "ping":
            result = .object([:])
        case "tools/list":
            var o: [String: JSONValue] = ["tools": .array(MCPTool.listings)]
            if modern { o["ttlMs"] = .number(0); o["cacheScope"] = .string("private") }
            result = .object(o)
        case "tools/call":
            guard case .string(let name)? = message.params?["name"], let tool = MCPTool.all.first(where: { $0.name == name }) else {
                return Self.rpcError(200, id: id, code: -32602, "no such tool")
            }
            var arguments: [String: JSONValue] = [:]
            switch message.params?["arguments"] {
            case .object(let a)?: arguments = a
            case nil, .null?: break
            default: return Self.rpcError(200, id: id, code: -32602, "arguments must be an object")
            }
            result = await call(tool, arguments, like: req)
        default:
            return Self.rpcError(200, id: id, code: -32601, "method not found: \(method)")
        }
        var answer = result
        if modern, case .object(var o) = answer {
            o["resultType"] = .string("complete")
            answer = .object(o)
        }
        return .json(200, JSONValue.object(["jsonrpc": .string("2.0"), "id": id, "result": answer]), headers: headers)
    }

    static let serverInfo: JSONValue = .object([
        "name": .string("redeem"), "title": .string("Redeem"), "version": .string(Build.version),
    ])

    static func rpcError(_ status: Int, id: JSONValue?, code: Int, _ message: String, data: JSONValue? = nil) -> HTTPResponse {
        var error: [String: JSONValue] = ["code": .number(Double(code)), "message": .string(message)]
        if let data { error["data"] = data }
        return .json(status, JSONValue.object(["jsonrpc": .string("2.0"), "id": id ?? .null, "error": .object(error)]))
    }

    /// Runs `tool`'s route with the caller's credential, mode and app, as the same request id, and
    /// answers its result: the route's answer as `structuredContent` (as `MCPTool.outputSchema`
    /// describes it) and as text, or its error (`isError`, with the API's code).
    func call(_ tool: MCPTool, _ arguments: [String: JSONValue], like outer: HTTPRequest) async -> JSONValue {
        var path = tool.path
        for p in tool.pathParameters {
            guard case .string(let value)? = arguments[p], !value.isEmpty, !value.contains("/"), !value.contains("\u{0}") else {
                return Self.toolError(["code": .string("invalid"), "message": .string("\(p) is required"), "field": .string(p)])
            }
            path = path.replacingOccurrences(of: "{\(p)}", with: value)
        }
        var query: [String: String] = [:]
        for (argument, parameter) in tool.queryArguments {
            switch arguments[argument] {
            case .string(let s)?: query[parameter.name] = s
            case .number(let n)?: query[parameter.name] = n.rounded() == n ? String(Int64(n)) : String(n)
            case .bool(let b)?: query[parameter.name] = b ? "true" : "false"
            default: break
            }
        }
        var headers = ["host": outer.header("host") ?? "localhost"]
        for name in ["authorization", "redeem-mode", "redeem-app"] {
            if let v = outer.header(name) { headers[name] = v }
        }
        var body = Data()
        if tool.route.body != nil {
            let taken = Set(tool.pathParameters + tool.queryArguments.map(\.argument))
            body = (try? JSONEncoder.wire().encode(JSONValue.object(arguments.filter { !taken.contains($0.key) }))) ?? Data("{}".utf8)
            headers["content-type"] = "application/json"
        }
        let request = HTTPRequest(method: tool.method.rawValue, path: path, query: query, headers: headers, body: body,
                                  requestId: outer.requestId, clientAddress: outer.clientAddress)
        var router = Router(mapError: { error, request in GatewayErrors.response(for: error, request: request) })
        let route = tool.route
        router.add(route.method.rawValue, route.path, route.handler(self))
        let response = await router.handle(request)

        var data = response.body
        if let produce = response.producer {
            let stream = HTTPBodyStream(limit: Int.max)
            await produce(stream)
            data = stream.drain()
        }
        guard (200..<300).contains(response.status) else {
            if case .object(let o)? = try? JSONDecoder.wire().decode(JSONValue.self, from: data), case .object(let e)? = o["error"] {
                return Self.toolError(e)
            }
            return Self.toolError(["code": .string("internal"), "message": .string("the request failed with status \(response.status)")])
        }
        let code = arguments["code"] ?? .null
        let structured: JSONValue
        if response.status == 204 {
            structured = .object(["code": code, "active": .bool(false)])
        } else {
            let answer = (try? JSONDecoder.wire().decode(JSONValue.self, from: data)) ?? .null
            if let field = tool.field, case .object(let o) = answer {
                structured = .object(["code": code, field: o[field] ?? .array([])])
            } else {
                structured = answer
            }
        }
        let content: JSONValue = .object(["type": .string("text"), "text": .string(structured.text)])
        return .object(["content": .array([content]),
                        "structuredContent": structured, "isError": .bool(false)])
    }

    static func toolError(_ error: [String: JSONValue]) -> JSONValue {
        let code: String = if case .string(let c)? = error["code"] { c } else { "internal" }
        let message: String = if case .string(let m)? = error["message"] { m } else { "" }
        return .object(["content": .array([.object(["type": .string("text"), "text": .string("\(code): \(message)")])]),
                        "structuredContent": .object(["error": .object(error)]), "isError": .bool(true)])
    }
}
