import Core
import Foundation
import TestSupport
import XCTest

/// The MCP server at `/mcp`, driven by the official MCP Python SDK from PyPI, a 2.x
/// release (the 2026-07-28 revision through `server/discover`, and the initialize handshake) and a
/// 1.x release (the handshake, 2025-11-25), each in its own virtualenv that scripts/setup makes
/// (`.venv/mcp-2`, `.venv/mcp-1`). Then the protocol's edges over raw HTTP.
final class MCPTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack()
        minter = try stack.minter()
    }

    override class func stopSuite() { stack?.stop() }

    var mcpURL: String { Self.stack.gateway.appendingPathComponent("mcp").absoluteString }

    /// What `Tests/MCP/mcp_client.py` prints: the admin key's run and the readonly key's.
    struct Run: Decodable {
        let admin: AdminRun
        let readonly: ReadonlyRun
    }

    /// A tool's result: `structuredContent` as `structured`, the text content as `text`.
    struct ToolResult: Decodable {
        struct Structured: Decodable {
            struct Failure: Decodable { let code: String }
            struct Row: Decodable {
                let code: String?
                let redemptionId: String?
            }
            struct Offer: Decodable {}
            let code: String?
            let maxRedemptions: Int?
            let error: Failure?
            let data: [Row]?
            let redemptionId: String?
            let count: Int?
            let downloadUrl: String?
            let expiresAt: String?
            let storeOffers: [Offer]?
        }
        let isError: Bool?
        let structured: Structured?
        let text: String?
    }

    /// A JSON Schema, as far as these tests read it.
    struct Schema: Decodable {
        struct Property: Decodable {
            let `enum`: [String]?
            let properties: [String: Property]?
        }
        let properties: [String: Property]
        let required: [String]?
    }

    struct AdminRun: Decodable {
        let sdk: String?
        let protocolVersion: String?
        let sessionId: String?
        let tools: [String]
        let createSchema: Schema
        /// Each tool's `outputSchema.type`; the tools whose results validated against their output
        /// schema (`jsonschema`, in the client), and what did not validate.
        let outputSchemaTypes: [String: String?]
        let validated: [String]
        let outputErrors: [String]
        let dryRunStoreLimit, created, again, updated, got, redemptions, export: ToolResult
        let offers, codes, deactivated, missing: ToolResult
        /// Only when `list_redemptions` listed one.
        let redemption: ToolResult?
    }

    struct ReadonlyRun: Decodable {
        let readonlyCreate, readonlyList: ToolResult
        let validated: [String]
        let outputErrors: [String]
    }

    /// Runs the SDK client of `venv` with a readonly key and a redeemed coupon of this test's own,
    /// and answers the admin key's run.
    func drive(venv: String, mode: String) async throws -> AdminRun {
        let python = Project.root.appendingPathComponent(".venv/\(venv)/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else { throw TestFailure("no \(python): run scripts/setup") }
        let stack = Self.stack!, client = stack.client
        let key = try await client.json(
            "POST", "/v1/api-keys", ["name": "mcp readonly", "role": "readonly"], token: stack.adminKey)
        XCTAssertEqual(key.status, 201, key.text)
        let readonlyKey = try XCTUnwrap(try key.decode(APIKeyBody.self).key)
        // A coupon with one redemption, for list_redemptions and the CSV export.
        let redeemed = "MCPR-" + UUID().uuidString.prefix(6)
        let coupon = try await client.json(
            "POST", "/v1/coupons", ["code": redeemed, "kind": "freePeriod", "duration": ["unit": "week", "count": 1]],
            token: stack.adminKey)
        XCTAssertEqual(coupon.status, 201, coupon.text)
        let redemption = try await client.json(
            "POST", "/v1/redemptions", ["code": redeemed, "platform": "web"], token: try Self.minter.user().token)
        XCTAssertEqual(redemption.status, 201, redemption.text)
        let code = "MCP-" + UUID().uuidString.prefix(6)
        let script = Project.root.appendingPathComponent("Tests/MCP/mcp_client.py").path, url = mcpURL
        let out = try await offThePool {
            try Subprocess.run(python, [script, url, stack.adminKey, readonlyKey, code, redeemed, mode])
        }
        let line = out.split(separator: "\n").last.map(String.init) ?? ""
        let run: Run
        do { run = try JSONDecoder().decode(Run.self, from: Data(line.utf8)) } catch {
            throw TestFailure("\(error): \(out)")
        }
        XCTAssertFalse(line.contains("$ref"), "references are inlined")
        try checkAdmin(run.admin, code: code, redeemed: redeemed)
        checkReadonly(run.readonly)
        // Every tool has an output schema, an object, and a real result of each validated against it.
        XCTAssertEqual(run.admin.outputErrors + run.readonly.outputErrors, [])
        XCTAssertEqual(Set(run.admin.outputSchemaTypes.keys), Set(run.admin.tools))
        for (tool, type) in run.admin.outputSchemaTypes { XCTAssertEqual(type, "object", tool) }
        XCTAssertEqual(
            Set(run.admin.validated + run.readonly.validated), Set(run.admin.tools), "each tool answered once")
        try await checkExport(run.admin.export, redeemed: redeemed)
        return run.admin
    }

    func checkAdmin(_ a: AdminRun, code: String, redeemed: String) throws {
        XCTAssertEqual(
            a.tools,
            [
                "create_codes", "create_coupon", "deactivate_coupon", "export_redemptions_csv", "get_coupon", "get_redemption",
                "list_coupons", "list_redemptions", "list_store_offers", "update_coupon"
            ])
        // The input schema is the API's: CouponInput's fields, its rules, and dry_run.
        let schema = a.createSchema
        XCTAssertEqual(Set(schema.required ?? []), ["code", "kind", "duration"])
        XCTAssertEqual(schema.properties["kind"]?.enum, CouponKind.allCases.map(\.rawValue))
        XCTAssertNotNil(schema.properties["dry_run"])
        XCTAssertEqual(
            schema.properties["duration"]?.properties?.keys.sorted(), ["count", "unit"], "references are inlined")

        XCTAssertEqual(a.dryRunStoreLimit.isError, true)
        XCTAssertEqual(
            a.dryRunStoreLimit.structured?.error?.code, "storeLimit",
            "an iOS discount without a cap breaks a store limit, as the API says")
        XCTAssertEqual(a.created.isError, false)
        XCTAssertEqual(a.created.structured?.code, code)
        XCTAssertEqual(a.again.structured?.error?.code, "codeInUse")
        XCTAssertEqual(a.updated.structured?.maxRedemptions, 7)
        XCTAssertEqual(a.got.structured?.code, code)
        let rows = a.redemptions.structured?.data ?? []
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?.code, redeemed)
        XCTAssertEqual(a.redemption?.structured?.redemptionId, rows.first?.redemptionId)
        XCTAssertEqual(a.export.isError, false)
        XCTAssertEqual(a.export.structured?.count, 1)
        XCTAssertEqual(a.codes.structured?.count, 3)
        XCTAssertEqual(a.offers.structured?.storeOffers?.count, 0, "a free period has no store offers")
        XCTAssertEqual(a.deactivated.isError, false)
        XCTAssertEqual(a.missing.structured?.error?.code, "notFound")
        // Text content carries the same JSON.
        let text = try XCTUnwrap(a.got.text)
        XCTAssertEqual(try JSONDecoder().decode(ToolResult.Structured.self, from: Data(text.utf8)).code, code)
    }

    /// `export_redemptions_csv` answered a count and a one-time address, no row: the address gives,
    /// without a key, exactly the CSV the API gives with `Accept: text/csv`, once, then 410.
    func checkExport(_ export: ToolResult, redeemed: String) async throws {
        let client = Self.stack.client
        let url = try XCTUnwrap(export.structured?.downloadUrl)
        XCTAssertTrue(url.hasPrefix(Self.stack.gateway.absoluteString + "/v1/redemption-downloads/"), url)
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let expiresAt = try XCTUnwrap(
            export.structured?.expiresAt.flatMap { fractional.date(from: $0) ?? ISO8601DateFormatter().date(from: $0) })
        XCTAssertEqual(expiresAt.timeIntervalSinceNow, 24 * 3600, accuracy: 600)
        let api = try await client.send(
            "GET", "/v1/coupons/\(redeemed)/redemptions",
            headers: ["Authorization": "Bearer \(Self.stack.adminKey)", "Accept": "text/csv"])
        XCTAssertEqual(api.status, 200)
        let rows = api.text.split(whereSeparator: \.isNewline)
        XCTAssertEqual(rows.count, 2, api.text)
        let redemptionId = try XCTUnwrap(rows.last?.split(separator: ",").first.map(String.init))
        // The text content is the structured content's JSON: these four fields, and no row.
        let text = export.text ?? ""
        let fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], text)
        XCTAssertEqual(fields.keys.sorted(), ["code", "count", "downloadUrl", "expiresAt"])
        XCTAssertFalse(text.contains(redemptionId), "no row in the tool's result: \(text)")
        let path = String(url.dropFirst(Self.stack.gateway.absoluteString.count))
        let first = try await client.send("GET", path)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.header("Content-Type"), "text/csv; charset=utf-8")
        XCTAssertEqual(first.text, api.text, "the CSV the API gives")
        let second = try await client.send("GET", path)
        XCTAssertEqual(second.status, 410)
        XCTAssertTrue(second.text.contains("downloadGone"), second.text)
    }

    func checkReadonly(_ r: ReadonlyRun) {
        XCTAssertEqual(r.readonlyCreate.isError, true, "a readonly key is refused, as a tool result")
        XCTAssertEqual(r.readonlyCreate.structured?.error?.code, "forbidden")
        XCTAssertEqual(r.readonlyList.isError, false)
    }

    /// Each client setup of docs/api.md ("Connecting a client"), read from the page and connected as
    /// that client would: its URL, its header and its transport reach the server with the key.
    func testTheDocumentedClientSetupsConnect() async throws {
        struct Seen: Decodable {
            let client: String
            let documentedUrl: String?
            let transport: String?
            let headerNames: [String]?
            let sendsTheKey: Bool?
            let protocolVersion: String?
            let tools: Int?
            let callFailed: Bool?
            let error: String?
        }
        struct Out: Decodable { let clients: [Seen] }
        let stack = Self.stack!
        let python = Project.root.appendingPathComponent(".venv/mcp-1/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestFailure("no \(python): run scripts/setup")
        }
        let made = try await stack.client.json(
            "POST", "/v1/api-keys", ["name": "assistant", "role": "readonly"], token: stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        let key = try XCTUnwrap(try made.decode(APIKeyBody.self).key)
        let script = Project.root.appendingPathComponent("Tests/MCP/doc_clients.py").path
        let doc = Project.root.appendingPathComponent("docs/api.md").path
        let gateway = stack.gateway.absoluteString
        let out = try await offThePool { try Subprocess.run(python, [script, doc, gateway, key]) }
        let line = out.split(separator: "\n").last.map(String.init) ?? ""
        let seen: Out
        do { seen = try JSONDecoder().decode(Out.self, from: Data(line.utf8)) } catch {
            throw TestFailure("\(error): \(out)")
        }
        XCTAssertEqual(seen.clients.map(\.client), ["Claude Desktop", "Claude Code", "Cursor", "VS Code"])
        for c in seen.clients {
            XCTAssertNil(c.error, c.client)
            XCTAssertEqual(c.documentedUrl, "http://127.0.0.1:8080/mcp", c.client)
            XCTAssertEqual(c.transport, "streamable-http", c.client)
            XCTAssertEqual(c.headerNames, ["Authorization"], c.client)
            XCTAssertEqual(c.sendsTheKey, true, c.client)
            XCTAssertEqual(c.protocolVersion, "2025-11-25", c.client)
            XCTAssertEqual(c.tools, MCPTests.toolCount, c.client)
            XCTAssertEqual(c.callFailed, false, c.client)
        }
    }

    static let toolCount = 10

    /// A redemptions export's address keeps the mode of the key that asked: a test key's export of a
    /// code names the test coupon of that code, never the live one's redemptions.
    func testAnExportAddressKeepsItsKeysMode() async throws {
        let stack = Self.stack!, client = stack.client
        let made = try await client.json(
            "POST", "/v1/api-keys", ["name": "mcp test admin", "role": "admin", "mode": "test"], token: stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        let testKey = try XCTUnwrap(try made.decode(APIKeyBody.self).key)
        let code = "MCPX-" + UUID().uuidString.prefix(6)
        let coupon: [String: Any] = ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1]]
        let live = try await client.json("POST", "/v1/coupons", coupon, token: stack.adminKey)
        XCTAssertEqual(live.status, 201, live.text)
        let redeemed = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: try Self.minter.user().token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let missing = try await client.json("POST", "/v1/coupons/\(code)/redemption-exports", [:], token: testKey)
        XCTAssertEqual(missing.status, 404, "a test key sees no live coupon: \(missing.text)")
        let test = try await client.json("POST", "/v1/coupons", coupon, token: testKey)
        XCTAssertEqual(test.status, 201, test.text)

        struct Export: Decodable {
            let count: Int
            let downloadUrl: String
        }
        for (key, rows) in [(testKey, 0), (stack.adminKey, 1)] {
            let answer = try await client.json("POST", "/v1/coupons/\(code)/redemption-exports", [:], token: key)
            XCTAssertEqual(answer.status, 201, answer.text)
            let export = try answer.decode(Export.self)
            XCTAssertEqual(export.count, rows)
            let path = String(export.downloadUrl.dropFirst(stack.gateway.absoluteString.count))
            let csv = try await client.send("GET", path)
            XCTAssertEqual(csv.status, 200)
            XCTAssertEqual(csv.text.split(whereSeparator: \.isNewline).count, 1 + rows, csv.text)
        }
        let never = try await client.send("GET", "/v1/redemption-downloads/" + String(repeating: "A", count: 43))
        XCTAssertEqual(never.status, 410)
    }

    /// A JSON-RPC answer.
    struct RPC: Decodable {
        struct Result: Decodable {
            let resultType: String?
            let supportedVersions: [String]?
            let protocolVersion: String?
        }
        struct Failure: Decodable { let code: Int }
        let result: Result?
        let error: Failure?
    }

    func testTheSDK2xSpeaksTheCurrentRevision() async throws {
        let a = try await drive(venv: "mcp-2", mode: "auto")
        XCTAssertTrue((a.sdk ?? "").hasPrefix("2."))
        XCTAssertEqual(a.protocolVersion, "2026-07-28")
        // Every change the tools made is audited like the API's, with the key as actor.
        let code = try XCTUnwrap(a.created.structured?.code)
        struct AuditEntry: Decodable { let action: String }
        let audit = try await Self.stack.client.get("/v1/audit?objectId=\(code)", token: Self.stack.adminKey).decode(
            ListBody<AuditEntry>.self)
        XCTAssertEqual(
            audit.data.map(\.action), ["coupon.deactivate", "coupon.createCodes", "coupon.update", "coupon.create"])
    }

    func testTheSDK2xFallsBackToTheHandshake() async throws {
        let a = try await drive(venv: "mcp-2", mode: "legacy")
        XCTAssertEqual(a.protocolVersion, "2025-11-25")
    }

    func testTheSDK1xSpeaksTheHandshakeRevision() async throws {
        let a = try await drive(venv: "mcp-1", mode: "legacy")
        XCTAssertTrue((a.sdk ?? "").hasPrefix("1."))
        XCTAssertEqual(a.protocolVersion, "2025-11-25")
        XCTAssertTrue((a.sessionId ?? "").hasPrefix("mcp-"), "initialize answers an Mcp-Session-Id")
    }

    func post(_ body: [String: Any], headers: [String: String] = [:], token: String? = MCPTests.stack.adminKey) async throws -> HTTPClient.Response {
        var h = ["Content-Type": "application/json", "Accept": "application/json, text/event-stream"]
        if let token { h["Authorization"] = "Bearer \(token)" }
        for (k, v) in headers { h[k] = v }
        return try await Self.stack.client.send("POST", "/mcp", body: try JSONSerialization.data(withJSONObject: body), headers: h)
    }

    static func modern(_ method: String, _ params: [String: Any] = [:]) -> [String: Any] {
        var p = params
        p["_meta"] = ["io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": [:]]
        return ["jsonrpc": "2.0", "id": 7, "method": method, "params": p]
    }

    func testTheProtocolsEdges() async throws {
        // No key: 401 with a bare bearer challenge. There is no authorization server, so no
        // protected-resource metadata is advertised or served (a client would try OAuth and fail).
        let none = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: nil)
        XCTAssertEqual(none.status, 401)
        XCTAssertEqual(none.header("WWW-Authenticate"), "Bearer", "\(none.headers)")
        let bad = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: "sk_live_not_a_key")
        XCTAssertEqual(bad.status, 401)
        XCTAssertEqual(bad.header("WWW-Authenticate"), "Bearer error=\"invalid_token\"", "\(bad.headers)")
        for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
            let meta = try await Self.stack.client.get(path)
            XCTAssertEqual(meta.status, 404, path)
        }
        // An end user's session is not an operator's.
        let user = try Self.minter.user()
        let userPing = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: user.token)
        XCTAssertEqual(userPing.status, 403)

        // 2026-07-28: discover, with resultType; the headers must agree with the body.
        let v = ["MCP-Protocol-Version": "2026-07-28"]
        let discover = try await post(Self.modern("server/discover"), headers: v.merging(["Mcp-Method": "server/discover"]) { $1 })
        XCTAssertEqual(discover.status, 200, discover.text)
        let result = try XCTUnwrap(try discover.decode(RPC.self).result)
        XCTAssertEqual(result.resultType, "complete")
        XCTAssertTrue((result.supportedVersions ?? []).contains("2026-07-28"))
        let list = try await post(Self.modern("tools/list"), headers: v.merging(["Mcp-Method": "tools/list"]) { $1 })
        XCTAssertEqual(try list.decode(RPC.self).result?.resultType, "complete")
        let mismatch = try await post(Self.modern("tools/list"), headers: v.merging(["Mcp-Method": "tools/call"]) { $1 })
        XCTAssertEqual(mismatch.status, 400)
        XCTAssertEqual(try mismatch.decode(RPC.self).error?.code, -32020)
        let unknown = try await post(Self.modern("tools/list"), headers: ["MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"])
        XCTAssertEqual(unknown.status, 400)
        XCTAssertEqual(try unknown.decode(RPC.self).error?.code, -32022)

        // 2025-11-25: initialize answers a session id; a notification is 202; an unknown tool is a protocol error.
        let initialize = try await post(["jsonrpc": "2.0", "id": 1, "method": "initialize",
                                         "params": ["protocolVersion": "2025-11-25", "capabilities": [:], "clientInfo": ["name": "t", "version": "1"]]])
        XCTAssertEqual(initialize.status, 200)
        XCTAssertNotNil(initialize.headers["Mcp-Session-Id"])
        XCTAssertEqual(try initialize.decode(RPC.self).result?.protocolVersion, "2025-11-25")
        XCTAssertFalse(initialize.text.contains("resultType"), "no resultType before 2026-07-28")
        XCTAssertNotNil(try initialize.decode(RPC.self).result)
        let notified = try await post(["jsonrpc": "2.0", "method": "notifications/initialized"])
        XCTAssertEqual(notified.status, 202)
        let noTool = try await post(["jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ["name": "drop_tables", "arguments": [:]]],
                                    headers: ["MCP-Protocol-Version": "2025-11-25"])
        XCTAssertEqual(try noTool.decode(RPC.self).error?.code, -32602)
        let get = try await Self.stack.client.send("GET", "/mcp", headers: ["Authorization": "Bearer \(Self.stack.adminKey)"])
        XCTAssertEqual(get.status, 405)
    }
}
