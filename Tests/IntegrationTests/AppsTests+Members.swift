import Core
import Foundation
import TestSupport
import XCTest

/// Members with a role in each app, and MCP in a key's app (docs/apps.md).
extension AppsTests {
    struct Member: Decodable {
        let id: String
        let email: String
        let role: String
    }

    static let memberPassword = "a long operator passphrase"

    /// Invites `email` with `role` to `app` (by the bootstrap key, a deployment admin) and accepts:
    /// the member's account id and access token. The first invitation makes the account (201),
    /// the next ones join it with its password (200).
    func join(_ email: String, as role: String, in app: String) async throws -> (id: String, token: String) {
        let invited = try await send("POST", "/v1/members", ["email": email, "role": role], token: admin, app: app)
        XCTAssertEqual(invited.status, 201, invited.text)
        let invite = try XCTUnwrap(try invited.json()["token"] as? String)
        let accepted = try await client.json(
            "POST", "/v1/members/accept", ["token": invite, "password": Self.memberPassword])
        XCTAssertTrue([200, 201].contains(accepted.status), accepted.text)
        let o = try accepted.decode(AccountSessionBody.self)
        return (o.account.id, o.session.accessToken)
    }

    func signIn(_ email: String) async throws -> String {
        let r = try await client.json("POST", "/v1/sessions", ["email": email, "password": Self.memberPassword])
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode(AccountSessionBody.self).session.accessToken
    }

    func members(in app: String?, token: String) async throws -> [String: String] {
        let r = try await send("GET", "/v1/members?limit=100", token: token, app: app)
        XCTAssertEqual(r.status, 200, r.text)
        return Dictionary(uniqueKeysWithValues: try r.decode(ListBody<Member>.self).data.map { ($0.email, $0.role) })
    }

    /// Waits until `token`'s session is refused (a change of role ends it).
    func waitUntilRefused(_ token: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        let refused = try await Self.stack.eventually(5) {
            try await self.send("GET", "/v1/apps", token: token).status == 401
        }
        XCTAssertTrue(refused, "the member's old session still works", file: file, line: line)
    }

    func newCoupon(_ prefix: String) -> [String: Any] {
        [
            "code": prefix + "-" + UUID().uuidString.prefix(8).uppercased(), "kind": "freePeriod",
            "duration": ["unit": "day", "count": 7]
        ]
    }

    func testAMemberHasARoleInEachAppAndNoneElsewhere() async throws {
        let a = try await makeApp("Members A")
        let b = try await makeApp("Members B")
        let c = try await makeApp("Members C")
        let email = "each-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let (id, _) = try await join(email, as: "support", in: a.id)
        var (_, token) = try await join(email, as: "admin", in: b.id)

        // Support in A: reads coupons, makes none, manages no members.
        let readsA = try await send("GET", "/v1/coupons", token: token, app: a.id).status
        XCTAssertEqual(readsA, 200)
        let r1 = try await send("POST", "/v1/coupons", newCoupon("A"), token: token, app: a.id)
        XCTAssertEqual(r1.status, 403, r1.text)
        let membersOfA = try await send("GET", "/v1/members", token: token, app: a.id).status
        XCTAssertEqual(membersOfA, 403)
        // Admin in B: makes coupons and keys, and sees B's members with their role there.
        let made = try await send("POST", "/v1/coupons", newCoupon("B"), token: token, app: b.id)
        XCTAssertEqual(made.status, 201, made.text)
        let keysOfB = try await send("GET", "/v1/api-keys", token: token, app: b.id).status
        XCTAssertEqual(keysOfB, 200)
        let ofB = try await members(in: b.id, token: token)
        XCTAssertEqual(ofB, [email: "admin"])
        let ofA = try await members(in: a.id, token: admin)
        XCTAssertEqual(ofA, [email: "support"])
        let inDefault = try await members(in: nil, token: admin)[email]
        XCTAssertNil(inDefault, "no role in the default app")
        // No role in C, nor in the default app: 403 there.
        for app in [c.id, nil] {
            let r = try await send("GET", "/v1/coupons", token: token, app: app)
            XCTAssertEqual(r.status, 403, r.text)
            XCTAssertEqual(r.errorCode, "forbidden")
        }
        // An admin of B is no deployment admin: it lists the apps it has a role in, and makes none.
        let apps = try list(try await send("GET", "/v1/apps?limit=100", token: token)).compactMap(\.id)
        XCTAssertEqual(apps, [a.id, b.id])
        let makesApp = try await send("POST", "/v1/apps", ["name": "Not mine"], token: token).status
        XCTAssertEqual(makesApp, 403)
        // An admin key of A is no admin of B's members.
        let adminA = try await key(in: a.id, by: admin)
        let r2 = try await send("PATCH", "/v1/members/\(id)", ["role": "readonly"], token: adminA.key, app: b.id)
        XCTAssertEqual(r2.status, 403, r2.text)
        let adminC = try await key(in: c.id, by: admin)
        let r3 = try await send("PATCH", "/v1/members/\(id)", ["role": "admin"], token: adminC.key)
        XCTAssertEqual(r3.status, 404, "no member of C: \(r3.text)")

        // A new role in A leaves B's: the member's sessions end, the next one has both.
        let changed = try await send("PATCH", "/v1/members/\(id)", ["role": "readonly"], token: adminA.key)
        XCTAssertEqual(changed.status, 200, changed.text)
        XCTAssertEqual(try changed.decode(Member.self).role, "readonly")
        try await waitUntilRefused(token)
        token = try await signIn(email)
        let ofAAfter = try await members(in: a.id, token: admin)
        XCTAssertEqual(ofAAfter, [email: "readonly"])
        let ofBAfter = try await members(in: b.id, token: token)
        XCTAssertEqual(ofBAfter, [email: "admin"])
        let readsAAfter = try await send("GET", "/v1/coupons", token: token, app: a.id).status
        XCTAssertEqual(readsAAfter, 200)
        let r4 = try await send("POST", "/v1/coupons", newCoupon("B"), token: token, app: b.id)
        XCTAssertEqual(r4.status, 201, r4.text)

        // Removed from B, the member stays in A.
        let removed = try await send("DELETE", "/v1/members/\(id)", token: admin, app: b.id)
        XCTAssertEqual(removed.status, 204, removed.text)
        try await waitUntilRefused(token)
        token = try await signIn(email)
        let readsB = try await send("GET", "/v1/coupons", token: token, app: b.id).status
        XCTAssertEqual(readsB, 403)
        let readsAStill = try await send("GET", "/v1/coupons", token: token, app: a.id).status
        XCTAssertEqual(readsAStill, 200)
        let appsLeft = try list(try await send("GET", "/v1/apps", token: token)).compactMap(\.id)
        XCTAssertEqual(appsLeft, [a.id])

        // Each change is in its own app's audit log only.
        let auditA = try list(try await send("GET", "/v1/audit?limit=100", token: admin, app: a.id))
        let auditB = try list(try await send("GET", "/v1/audit?limit=100", token: admin, app: b.id))
        let auditDefault = try list(try await send("GET", "/v1/audit?limit=100", token: admin))
        func actions(_ entries: [Item]) -> Set<String> {
            Set(entries.filter { $0.objectId?.lowercased() == id.lowercased() }.compactMap(\.action))
        }
        XCTAssertEqual(actions(auditA), ["member.join", "member.update"])
        XCTAssertEqual(actions(auditB), ["member.join", "member.remove"])
        XCTAssertEqual(actions(auditDefault), [])
    }

    func testAMemberInvitedToAnotherAppIsNoDeploymentAdminAndTheDefaultAppsAdminIs() async throws {
        let a = try await makeApp("Invited")
        let email = "invited-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let invited = try await send(
            "POST", "/v1/members", ["email": email, "role": "admin"], token: admin, app: a.id)
        XCTAssertEqual(invited.status, 201, invited.text)
        let inviteId = try XCTUnwrap(try invited.json()["id"] as? String)
        // The invitation is A's: listed and revoked there only.
        let pendingA = try list(try await send("GET", "/v1/members/invites", token: admin, app: a.id)).compactMap(
            \.id)
        XCTAssertEqual(pendingA, [inviteId])
        let pendingDefault = try list(try await send("GET", "/v1/members/invites?limit=100", token: admin))
        XCTAssertFalse(pendingDefault.contains { $0.id == inviteId })
        let revokedElsewhere = try await send("DELETE", "/v1/members/invites/\(inviteId)", token: admin)
        XCTAssertEqual(revokedElsewhere.status, 404, revokedElsewhere.text)

        // The default app's admin member is the deployment's: admin in every app, every app listed.
        let deploymentAdmin = try await member("admin")
        let everyApp = try list(try await send("GET", "/v1/apps?limit=100", token: deploymentAdmin)).compactMap(
            \.id)
        XCTAssertTrue(everyApp.contains(a.id))
        XCTAssertEqual(everyApp.first?.lowercased(), DefaultApp.id.lowercasedString)
        let r = try await send("POST", "/v1/coupons", newCoupon("D"), token: deploymentAdmin, app: a.id)
        XCTAssertEqual(r.status, 201, r.text)
        // A support member of the default app lists the default app only.
        let support = try await member("support")
        let supportApps = try list(try await send("GET", "/v1/apps?limit=100", token: support)).compactMap(\.id)
        XCTAssertEqual(supportApps.map { $0.lowercased() }, [DefaultApp.id.lowercasedString])
    }

    /// An MCP tool call with `token`: its `structuredContent`.
    func mcpTool(_ name: String, _ arguments: [String: Any], token: String) async throws -> [String: Any] {
        let r = try await client.mcpToolCall(name, arguments, token: token)
        XCTAssertEqual(r.status, 200, r.text)
        let result = try XCTUnwrap(try r.json()["result"] as? [String: Any], r.text)
        return try XCTUnwrap(result["structuredContent"] as? [String: Any], r.text)
    }

    func testMCPToolsWorkInTheKeysApp() async throws {
        let b = try await makeApp("MCP B")
        let adminB = try await key(in: b.id, by: admin)
        let ofDefault = newCoupon("MCPA")
        let r = try await send("POST", "/v1/coupons", ofDefault, token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        let codeA = try XCTUnwrap(ofDefault["code"] as? String)

        let ofB = newCoupon("MCPB")
        let created = try await mcpTool("create_coupon", ofB, token: adminB.key)
        XCTAssertNil(created["error"], "\(created)")
        let codeB = try XCTUnwrap(ofB["code"] as? String)
        XCTAssertEqual(created["code"] as? String, codeB)

        let listed = try await mcpTool("list_coupons", ["limit": 100], token: adminB.key)
        let codes = ((listed["data"] as? [[String: Any]]) ?? []).compactMap { $0["code"] as? String }
        XCTAssertEqual(codes, [codeB], "B's key lists B's coupons only")
        let other = try await mcpTool("get_coupon", ["code": codeA], token: adminB.key)
        XCTAssertEqual((other["error"] as? [String: Any])?["code"] as? String, "notFound")
        // Over HTTP the coupon is B's, and not the default app's.
        let ofBByB = try await send("GET", "/v1/coupons/\(codeB)", token: adminB.key).status
        XCTAssertEqual(ofBByB, 200)
        let ofBByDefault = try await send("GET", "/v1/coupons/\(codeB)", token: admin).status
        XCTAssertEqual(ofBByDefault, 404)
        let mine = try await mcpTool("get_coupon", ["code": codeA], token: admin)
        XCTAssertNil(mine["error"], "the default app's key still reads its own: \(mine)")
    }
}
