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
            let csv: String?
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
        let dryRunStoreLimit, created, again, updated, got, redemptions, csv, offers, deactivated, missing: ToolResult
        /// Only when `list_redemptions` listed one.
        let redemption: ToolResult?
    }

    struct ReadonlyRun: Decodable {
        let readonlyCreate, readonlyList: ToolResult
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
        let csv = a.csv.structured?.csv ?? ""
        XCTAssertTrue(csv.hasPrefix("redemptionId,code,accountId,appUserId,platform,productId,pricePaid,currency,status,sandbox,reservedAt,completedAt"), csv)
        XCTAssertEqual(csv.split(whereSeparator: \.isNewline).count, 2, csv)
        XCTAssertEqual(a.offers.structured?.storeOffers?.count, 0, "a free period has no store offers")
        XCTAssertEqual(a.deactivated.isError, false)
        XCTAssertEqual(a.missing.structured?.error?.code, "notFound")
        // Text content carries the same JSON.
        let text = try XCTUnwrap(a.got.text)
        XCTAssertEqual(try JSONDecoder().decode(ToolResult.Structured.self, from: Data(text.utf8)).code, code)
    }

    func checkReadonly(_ r: ReadonlyRun) {
        XCTAssertEqual(r.readonlyCreate.isError, true, "a readonly key is refused, as a tool result")
        XCTAssertEqual(r.readonlyCreate.structured?.error?.code, "forbidden")
        XCTAssertEqual(r.readonlyList.isError, false)
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
        XCTAssertEqual(audit.data.map(\.action), ["coupon.deactivate", "coupon.update", "coupon.create"])
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
        // No key: 401 pointing at the protected-resource metadata, which is served.
        let none = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: nil)
        XCTAssertEqual(none.status, 401)
        XCTAssertTrue((none.headers["Www-Authenticate"] ?? none.headers["WWW-Authenticate"] ?? "").contains("/.well-known/oauth-protected-resource"), "\(none.headers)")
        let bad = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: "sk_live_not_a_key")
        XCTAssertEqual(bad.status, 401)
        let meta = try await Self.stack.client.get("/.well-known/oauth-protected-resource")
        XCTAssertEqual(meta.status, 200)
        struct Metadata: Decodable { let resource: String }
        XCTAssertEqual(try meta.decode(Metadata.self).resource, mcpURL)
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
