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
    nonisolated(unsafe) static var readonlyKey: String!
    nonisolated(unsafe) static var redeemed: String!

    override class func startSuite() throws {
        stack = try Stack()
        minter = try stack.minter()
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var failure: (any Error)?
        Task {
            do {
                let key = try await stack.client.json("POST", "/v1/api-keys", ["name": "mcp readonly", "role": "readonly"], token: stack.adminKey)
                readonlyKey = try key.json()["key"] as? String
                // A coupon with one redemption, for list_redemptions and the CSV export.
                let code = "MCPR-" + UUID().uuidString.prefix(6)
                _ = try await stack.client.json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1]],
                                                token: stack.adminKey)
                let user = try minter.user()
                _ = try await stack.client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: user.token)
                redeemed = code
            } catch { failure = error }
            done.signal()
        }
        done.wait()
        if let failure { throw failure }
    }

    override class func stopSuite() { stack?.stop() }

    var mcpURL: String { Self.stack.gateway.appendingPathComponent("mcp").absoluteString }

    /// Runs the SDK client of `venv` and answers what it printed.
    func drive(venv: String, mode: String) throws -> [String: Any] {
        let python = Project.root.appendingPathComponent(".venv/\(venv)/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else { throw TestFailure("no \(python): run scripts/setup") }
        let code = "MCP-" + UUID().uuidString.prefix(6)
        let out = try Subprocess.run(python, [Project.root.appendingPathComponent("Tests/MCP/mcp_client.py").path, mcpURL, Self.stack.adminKey,
                                              Self.readonlyKey, code, Self.redeemed, mode])
        let line = out.split(separator: "\n").last.map(String.init) ?? ""
        let result = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], out)
        let admin = try XCTUnwrap(result["admin"] as? [String: Any])
        try checkAdmin(admin, code: code)
        try checkReadonly(try XCTUnwrap(result["readonly"] as? [String: Any]))
        return admin
    }

    func structured(_ o: [String: Any], _ key: String) -> [String: Any] { (o[key] as? [String: Any])?["structured"] as? [String: Any] ?? [:] }
    func isError(_ o: [String: Any], _ key: String) -> Bool? { (o[key] as? [String: Any])?["isError"] as? Bool }
    func errorCode(_ o: [String: Any], _ key: String) -> String? { (structured(o, key)["error"] as? [String: Any])?["code"] as? String }

    func checkAdmin(_ a: [String: Any], code: String) throws {
        XCTAssertEqual(a["tools"] as? [String], ["create_coupon", "deactivate_coupon", "export_redemptions_csv", "get_coupon", "get_redemption",
                                                 "list_coupons", "list_redemptions", "list_store_offers", "update_coupon"])
        // The input schema is the API's: CouponInput's fields, its rules, and dry_run.
        let schema = try XCTUnwrap(a["createSchema"] as? [String: Any])
        let properties = try XCTUnwrap(schema["properties"] as? [String: Any])
        XCTAssertEqual(Set(schema["required"] as? [String] ?? []), ["code", "kind", "duration"])
        XCTAssertEqual((properties["kind"] as? [String: Any])?["enum"] as? [String], CouponKind.allCases.map(\.rawValue))
        XCTAssertNotNil(properties["dry_run"])
        XCTAssertEqual(((properties["duration"] as? [String: Any])?["properties"] as? [String: Any])?.keys.sorted(), ["count", "unit"],
                       "references are inlined")
        XCTAssertFalse(String(describing: schema).contains("$ref"))

        XCTAssertEqual(isError(a, "dryRunStoreLimit"), true)
        XCTAssertEqual(errorCode(a, "dryRunStoreLimit"), "storeLimit", "an iOS discount without a cap breaks a store limit, as the API says")
        XCTAssertEqual(isError(a, "created"), false)
        XCTAssertEqual(structured(a, "created")["code"] as? String, code)
        XCTAssertEqual(errorCode(a, "again"), "codeInUse")
        XCTAssertEqual(structured(a, "updated")["maxRedemptions"] as? Int, 7)
        XCTAssertEqual(structured(a, "got")["code"] as? String, code)
        let rows = structured(a, "redemptions")["data"] as? [[String: Any]] ?? []
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?["code"] as? String, Self.redeemed)
        XCTAssertEqual(structured(a, "redemption")["redemptionId"] as? String, rows.first?["redemptionId"] as? String)
        let csv = structured(a, "csv")["csv"] as? String ?? ""
        XCTAssertTrue(csv.hasPrefix("redemptionId,code,accountId,appUserId,platform,productId,pricePaid,currency,status,sandbox,reservedAt,completedAt"), csv)
        XCTAssertEqual(csv.split(whereSeparator: \.isNewline).count, 2, csv)
        XCTAssertEqual(structured(a, "offers")["storeOffers"] as? [Any] as? [String], [], "a free period has no store offers")
        XCTAssertEqual(isError(a, "deactivated"), false)
        XCTAssertEqual(errorCode(a, "missing"), "notFound")
        // Text content carries the same JSON.
        let text = (a["got"] as? [String: Any])?["text"] as? String ?? ""
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["code"] as? String, code)
    }

    func checkReadonly(_ r: [String: Any]) throws {
        XCTAssertEqual(isError(r, "readonlyCreate"), true, "a readonly key is refused, as a tool result")
        XCTAssertEqual(errorCode(r, "readonlyCreate"), "forbidden")
        XCTAssertEqual(isError(r, "readonlyList"), false)
    }

    func test1_theSDK2xSpeaksTheCurrentRevision() async throws {
        let a = try drive(venv: "mcp-2", mode: "auto")
        XCTAssertTrue((a["sdk"] as? String ?? "").hasPrefix("2."))
        XCTAssertEqual(a["protocolVersion"] as? String, "2026-07-28")
        // Every change the tools made is audited like the API's, with the key as actor.
        let code = try XCTUnwrap(structured(a, "created")["code"] as? String)
        let audit = try await Self.stack.client.get("/v1/audit?objectId=\(code)", token: Self.stack.adminKey)
        XCTAssertEqual((try audit.json()["data"] as? [[String: Any]])?.compactMap { $0["action"] as? String },
                       ["coupon.deactivate", "coupon.update", "coupon.create"])
    }

    func test2_theSDK2xFallsBackToTheHandshake() throws {
        let a = try drive(venv: "mcp-2", mode: "legacy")
        XCTAssertEqual(a["protocolVersion"] as? String, "2025-11-25")
    }

    func test3_theSDK1xSpeaksTheHandshakeRevision() throws {
        let a = try drive(venv: "mcp-1", mode: "legacy")
        XCTAssertTrue((a["sdk"] as? String ?? "").hasPrefix("1."))
        XCTAssertEqual(a["protocolVersion"] as? String, "2025-11-25")
        XCTAssertTrue((a["sessionId"] as? String ?? "").hasPrefix("mcp-"), "initialize answers an Mcp-Session-Id")
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

    func test4_theProtocolsEdges() async throws {
        // No key: 401 pointing at the protected-resource metadata, which is served.
        let none = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: nil)
        XCTAssertEqual(none.status, 401)
        XCTAssertTrue((none.headers["Www-Authenticate"] ?? none.headers["WWW-Authenticate"] ?? "").contains("/.well-known/oauth-protected-resource"), "\(none.headers)")
        let bad = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: "sk_live_not_a_key")
        XCTAssertEqual(bad.status, 401)
        let meta = try await Self.stack.client.get("/.well-known/oauth-protected-resource")
        XCTAssertEqual(meta.status, 200)
        XCTAssertEqual(try meta.json()["resource"] as? String, mcpURL)
        // An end user's session is not an operator's.
        let user = try Self.minter.user()
        let userPing = try await post(["jsonrpc": "2.0", "id": 1, "method": "ping"], token: user.token)
        XCTAssertEqual(userPing.status, 403)

        // 2026-07-28: discover, with resultType; the headers must agree with the body.
        let v = ["MCP-Protocol-Version": "2026-07-28"]
        let discover = try await post(Self.modern("server/discover"), headers: v.merging(["Mcp-Method": "server/discover"]) { $1 })
        XCTAssertEqual(discover.status, 200, discover.text)
        let result = try XCTUnwrap(try discover.json()["result"] as? [String: Any])
        XCTAssertEqual(result["resultType"] as? String, "complete")
        XCTAssertTrue((result["supportedVersions"] as? [String] ?? []).contains("2026-07-28"))
        let list = try await post(Self.modern("tools/list"), headers: v.merging(["Mcp-Method": "tools/list"]) { $1 })
        XCTAssertEqual((try list.json()["result"] as? [String: Any])?["resultType"] as? String, "complete")
        let mismatch = try await post(Self.modern("tools/list"), headers: v.merging(["Mcp-Method": "tools/call"]) { $1 })
        XCTAssertEqual(mismatch.status, 400)
        XCTAssertEqual(((try mismatch.json()["error"] as? [String: Any])?["code"] as? Int), -32020)
        let unknown = try await post(Self.modern("tools/list"), headers: ["MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"])
        XCTAssertEqual(unknown.status, 400)
        XCTAssertEqual(((try unknown.json()["error"] as? [String: Any])?["code"] as? Int), -32022)

        // 2025-11-25: initialize answers a session id; a notification is 202; an unknown tool is a protocol error.
        let initialize = try await post(["jsonrpc": "2.0", "id": 1, "method": "initialize",
                                         "params": ["protocolVersion": "2025-11-25", "capabilities": [:], "clientInfo": ["name": "t", "version": "1"]]])
        XCTAssertEqual(initialize.status, 200)
        XCTAssertNotNil(initialize.headers["Mcp-Session-Id"])
        XCTAssertEqual((try initialize.json()["result"] as? [String: Any])?["protocolVersion"] as? String, "2025-11-25")
        XCTAssertNil((try initialize.json()["result"] as? [String: Any])?["resultType"], "no resultType before 2026-07-28")
        let notified = try await post(["jsonrpc": "2.0", "method": "notifications/initialized"])
        XCTAssertEqual(notified.status, 202)
        let noTool = try await post(["jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ["name": "drop_tables", "arguments": [:]]],
                                    headers: ["MCP-Protocol-Version": "2025-11-25"])
        XCTAssertEqual(((try noTool.json()["error"] as? [String: Any])?["code"] as? Int), -32602)
        let get = try await Self.stack.client.send("GET", "/mcp", headers: ["Authorization": "Bearer \(Self.stack.adminKey)"])
        XCTAssertEqual(get.status, 405)
    }
}
