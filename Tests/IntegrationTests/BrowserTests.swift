import Core
import Foundation
import Runtime
import TestSupport
import XCTest

/// The redeem page in a real browser (headless Chromium driven over the DevTools protocol by
/// Tests/Browser/redeem_flow.py). Screenshots of each end state go to test-output/.
final class BrowserTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws {
        stack = try Stack()
    }

    override class func stopSuite() {
        stack?.stop()
    }

    var output: URL {
        let dir = Project.root.appendingPathComponent("test-output")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// What `Tests/Browser/redeem_flow.py` prints.
    struct Flow: Decodable {
        let ok: Bool
        let result: String?
        let status: String?
        let live: String?
        let labelled: Bool?
    }

    func drive(code: String, expect: String, screenshot: String, password: String? = nil) throws -> Flow {
        let shot = output.appendingPathComponent(screenshot)
        let out = try Subprocess.run("/usr/bin/python3", [Project.root.appendingPathComponent("Tests/Browser/redeem_flow.py").path,
                                                          Self.stack.gateway.absoluteString, code, expect, shot.path] + (password.map { [$0] } ?? []))
        let result: Flow
        do {
            result = try JSONDecoder().decode(
                Flow.self, from: out.split(separator: "\n").last.map { Data($0.utf8) } ?? Data())
        } catch { throw TestFailure("\(error): \(out)") }
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot.path), "screenshot written")
        return result
    }

    func coupon(_ extra: [String: Any]) async throws -> String {
        let code = "WEB-" + UUID().uuidString.prefix(6)
        var body: [String: Any] = ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1]]
        for (k, v) in extra { body[k] = v }
        let r = try await Self.stack.client.json("POST", "/v1/coupons", body, token: Self.stack.adminKey)
        XCTAssertEqual(r.status, 201, r.text)
        return code
    }

    func testSignUpRedeemAndSeeProUntil() async throws {
        let code = try await coupon([:])
        let r = try drive(code: code, expect: "completed", screenshot: "redeem-completed.png")
        XCTAssertEqual(r.ok, true, "\(r)")
        let text = r.result ?? ""
        XCTAssertTrue(text.hasPrefix("Pro until "), text)
        XCTAssertEqual(r.live, "polite", "status is a live region")
        XCTAssertEqual(r.labelled, true, "every input has a label")
    }

    /// The page says the server's sentence for the reason validate gives, not one of its own.
    func testAnExpiredCodeShowsTheServersSentence() async throws {
        let code = try await coupon(["expiresAt": Timestamp.iso8601(Date().addingTimeInterval(1))])
        try await Task.sleep(for: .seconds(1.5))  // time passing past the expiry is the point
        let r = try drive(code: code, expect: "expired", screenshot: "redeem-expired.png")
        XCTAssertEqual(r.ok, true, "\(r)")
        XCTAssertEqual(r.status, RefusalReason.expired.sentence)
    }

    /// An error answer is shown as the server's `message` (as a sentence: capital first, full
    /// stop last).
    func testARefusedSignUpShowsTheServersMessage() async throws {
        let weak = "short"
        let answer = try await Self.stack.client.json("POST", "/v1/accounts", ["email": "weak-\(UUID().uuidString.prefix(8))@example.com", "password": weak])
        XCTAssertEqual(answer.status, 422, answer.text)
        let message = try XCTUnwrap(try answer.decode(ErrorBody.self).error.message)
        let r = try drive(code: "ANY-CODE", expect: "signUpRefused", screenshot: "redeem-weak-password.png", password: weak)
        XCTAssertEqual(r.ok, true, "\(r)")
        XCTAssertEqual(r.status, message.prefix(1).uppercased() + message.dropFirst() + ".")
    }
}
