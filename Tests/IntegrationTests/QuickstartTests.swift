import Foundation
import TestSupport
import XCTest

/// The first hour, as a newcomer meets it: what `deploy/run-stack` prints on the first start of a
/// data directory (the dashboard, a live and a test key, the first member's invitation), and
/// docs/quickstart.md run as written, every `sh` block in order, against that stack.
final class QuickstartTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws {
        // No admin key given: the runner makes one, as on a newcomer's first start.
        stack = try Stack(environment: ["REDEEM_ADMIN_KEY": "", "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"])
    }

    override class func stopSuite() {
        stack?.stop()
    }

    var stack: Stack { Self.stack }
    var client: HTTPClient { stack.client }

    /// The value of one of the runner's `  name:   value   (note)` lines.
    func printed(_ name: String) throws -> String {
        let text = try String(contentsOf: stack.directory.appendingPathComponent("runner.out"), encoding: .utf8)
        let line = try XCTUnwrap(
            text.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("\(name):") },
            "run-stack printed no \(name) line:\n\(text)")
        let value = line.drop { $0 == " " }.dropFirst(name.count + 1).drop { $0 == " " }
        return String(value.prefix { $0 != " " })
    }

    func testTheFirstStartPrintsTheDashboardBothKeysAndAnInvitation() async throws {
        let dashboard = try printed("dashboard")
        XCTAssertEqual(dashboard, stack.gateway.absoluteString + "/dashboard")
        let page = try await client.get("/dashboard")
        XCTAssertEqual(page.status, 200)

        let adminKey = try printed("admin key")
        XCTAssertTrue(adminKey.hasPrefix("sk_live_"), adminKey)
        let testKey = try printed("test key")
        XCTAssertTrue(testKey.hasPrefix("sk_test_"), testKey)
        // The test key is a test-mode admin: it lists keys, and sees only test ones.
        let keys = try await client.get("/v1/api-keys", token: testKey)
        XCTAssertEqual(keys.status, 200, keys.text)
        let listed = try XCTUnwrap(try keys.json()["data"] as? [[String: Any]])
        XCTAssertFalse(listed.isEmpty)
        XCTAssertEqual(Set(listed.compactMap { $0["mode"] as? String }), ["test"])
        XCTAssertEqual(Set(listed.compactMap { $0["role"] as? String }), ["admin"])

        // The invitation makes the first member, an admin, with the password the newcomer chooses.
        let invitation = try printed("invitation")
        XCTAssertTrue(invitation.hasPrefix(dashboard + "#invite="), invitation)
        let token = String(invitation.dropFirst((dashboard + "#invite=").count))
        let accepted = try await client.json(
            "POST", "/v1/members/accept", ["token": token, "password": "a long and private passphrase"])
        XCTAssertEqual(accepted.status, 201, accepted.text)
        let members = try await client.get("/v1/members", token: adminKey)
        XCTAssertEqual(members.status, 200, members.text)
        let member = try XCTUnwrap((try members.json()["data"] as? [[String: Any]])?.first)
        XCTAssertEqual(member["email"] as? String, "owner@example.com")
        XCTAssertEqual(member["role"] as? String, "admin")
        // It is used once.
        let again = try await client.json(
            "POST", "/v1/members/accept", ["token": token, "password": "a long and private passphrase"])
        XCTAssertEqual(again.status, 401, again.text)
    }

    /// The page's `sh` blocks, in order, in one bash run with `set -euo pipefail`. The lines that
    /// set `REDEEM`, `TEST_KEY` and `RECEIVER_PORT` are replaced by this run's values.
    func testTheQuickStartRunsAsWritten() throws {
        let page = try String(
            contentsOf: Project.root.appendingPathComponent("docs/quickstart.md"), encoding: .utf8)
        let blocks = page.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        XCTAssertGreaterThanOrEqual(blocks.count, 7, "the quick start lost its steps")
        let given = ["REDEEM", "TEST_KEY", "RECEIVER_PORT"]
        let commands = blocks.joined(separator: "\n").split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in !given.contains { line.hasPrefix("export \($0)=") } }
        for name in given { XCTAssertTrue(page.contains("\nexport \(name)="), "the page no longer sets \(name)") }

        let directory = try Project.temporaryDirectory("quickstart")
        let script = directory.appendingPathComponent("quickstart.sh")
        // Whatever happens, the receiver the page starts in the background stops with the script.
        let prelude = "set -euo pipefail\ncd \"$QUICKSTART_DIR\"\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
        try (prelude + commands.joined(separator: "\n") + "\n").write(to: script, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["QUICKSTART_DIR"] = directory.path
        environment["REDEEM"] = stack.gateway.absoluteString
        environment["TEST_KEY"] = try printed("test key")
        environment["RECEIVER_PORT"] = String(try Project.freePort())
        let out = directory.appendingPathComponent("out").path
        let err = directory.appendingPathComponent("err").path
        let run = try Subprocess("/bin/bash", [script.path], environment: environment, stdout: out, stderr: err)
        guard let status = run.wait(seconds: 120) else {
            run.signal(SIGKILL)
            return XCTFail("the quick start did not finish in 120 s")
        }
        let output = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let errors = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        XCTAssertEqual(status, 0, "stdout:\n\(output)\nstderr:\n\(errors)")

        // Each step printed what the page says it prints.
        XCTAssertTrue(output.contains("\"mode\": \"test\""), output)
        XCTAssertTrue(output.contains("\"email\": \"ada@example.com\""), output)
        XCTAssertTrue(output.contains("\"valid\": true"), output)
        let lines = output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("completed"), output)
        XCTAssertTrue(output.contains("\"source\": \"local-sandbox\""), output)
        let redemption = try XCTUnwrap(lines.first { UUID(uuidString: $0) != nil }, output)
        let event = try XCTUnwrap(lines.first { $0.hasPrefix("coupon.redeemed ") }, "no signed webhook:\n\(output)")
        XCTAssertTrue(event.contains(redemption), event)
    }
}
