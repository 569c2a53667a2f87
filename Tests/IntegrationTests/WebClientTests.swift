import Foundation
import TestSupport
import XCTest

/// The web client (`Clients/web`, TypeScript) against the real stack: the suite compiles it with
/// Debian's tsc into a directory of its own and runs its node tests (`node --test`, TAP), which
/// sign up and in, refresh and sign out, validate and redeem a free month on the web, await it
/// across a reload, read the entitlement and the redemptions, meet refusals and errors as typed
/// values, sign in with Apple through the redirect flow against `FakeAppleID`, verify an email and
/// reset a password with the codes the stack mails to an SMTP sink (read over HTTP: `SMTPMailbox`),
/// and read every example body of `/openapi.json`. The /redeem page's copy of the client must be
/// what tsc makes from the sources.
final class WebClientTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var apple: FakeAppleID!
    nonisolated(unsafe) static var mailbox: SMTPMailbox!
    nonisolated(unsafe) static var compiled: URL!

    static let web = Project.root.appendingPathComponent("Clients/web")
    static let servicesId = "com.example.pilot.web"

    override class func startSuite() throws {
        compiled = try compile()
        let key = try TestAppleAPIKey(keyId: "WEBKEY1234")
        apple = try FakeAppleID(teamId: "TEAM4WEB00", keyId: key.keyId, clientSecretKey: key.key)
        mailbox = try SMTPMailbox()
        let port = try Project.freePort()
        stack = try Stack(environment: mailbox.environment.merging([
            "REDEEM_HTTP_PORT": String(port),
            "REDEEM_APPLE_CLIENT_ID": servicesId,
            "REDEEM_APPLE_SERVICES_ID": servicesId,
            "REDEEM_APPLE_TEAM_ID": "TEAM4WEB00",
            "REDEEM_APPLE_KEY_ID": key.keyId,
            "REDEEM_APPLE_PRIVATE_KEY": key.privateKeyFile.path,
            "REDEEM_APPLE_REDIRECT_URI": "http://127.0.0.1:\(port)/v1/sessions/apple/callback",
            "REDEEM_APPLE_JWKS": apple.keysURL.absoluteString,
            "REDEEM_APPLE_AUTHORIZE_URL": apple.authorizeURL.absoluteString,
            "REDEEM_APPLE_TOKEN_URL": apple.tokenURL.absoluteString,
            "REDEEM_APPLE_REVOKE_URL": apple.revokeURL.absoluteString,
        ]) { a, _ in a })
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await apple?.stop()
            await mailbox?.stop()
            done.signal()
        }
        done.wait()
        if let compiled { try? FileManager.default.removeItem(at: compiled) }
    }

    /// `tsc -p Clients/web` into a fresh directory (never the checkout's `dist/`), with the
    /// package's `package.json` beside it so node reads the output as ES modules.
    static func compile() throws -> URL {
        let out = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("redeem-web-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let (status, log) = try run("/usr/bin/tsc", ["-p", web.path, "--outDir", out.path])
        guard status == 0 else {
            throw TestFailure("tsc failed (\(status)); scripts/setup installs node-typescript:\n\(log)")
        }
        let manifest = "package.json"
        let copy = out.appendingPathComponent(manifest)
        try FileManager.default.copyItem(at: web.appendingPathComponent(manifest), to: copy)
        return out
    }

    /// Runs to its end; answers the exit status and what it wrote to stdout and stderr.
    static func run(_ executable: String, _ arguments: [String],
                    environment: [String: String]? = nil) throws -> (Int32, String) {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestFailure("\(executable) is missing: run scripts/setup")
        }
        let log = NSTemporaryDirectory() + "redeem-web-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let status = try Subprocess(executable, arguments, environment: environment, stdout: log, stderr: log).wait()
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    /// TAP's closing counts (`# pass 12`) and each test's line (`ok 3 - name` / `not ok 3 - name`;
    /// a skipped test, `ok 3 - name # SKIP`, is not a pass).
    struct Summary {
        var counts: [String: Int] = [:]
        var passed: Set<String> = []
        var failed: Set<String> = []

        init(tap: String) {
            for line in tap.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                let words = line.split(separator: " ", maxSplits: 2).map(String.init)
                if words.count == 3, words[0] == "#", let n = Int(words[2]) { counts[words[1]] = n }
                if let m = line.firstMatch(of: #/^(not ok|ok) \d+ - (.*?)( # SKIP.*)?$/#) {
                    if m.1 != "ok" { failed.insert(String(m.2)) } else if m.3 == nil { passed.insert(String(m.2)) }
                }
            }
        }
    }

    func testTheNodeSuitePassesAgainstTheStack() throws {
        let folder = Self.compiled.appendingPathComponent("test")
        let tests = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".test.js") }.sorted().map { folder.appendingPathComponent($0).path }
        XCTAssertEqual(tests.count, 5, "\(tests)")
        var environment = ProcessInfo.processInfo.environment
        environment["REDEEM_GATEWAY"] = Self.stack.gateway.absoluteString
        environment["REDEEM_ADMIN_KEY"] = Self.stack.adminKey
        environment["REDEEM_APPLE_WEB"] = "1"
        environment["REDEEM_MAILBOX"] = Self.mailbox.url.absoluteString
        environment["NO_COLOR"] = "1"
        let (status, out) = try Self.run("/usr/bin/node", ["--test", "--test-reporter=tap"] + tests,
                                         environment: environment)
        let summary = Summary(tap: out)
        XCTAssertEqual(status, 0, out)
        XCTAssertEqual(summary.counts["fail"], 0, out)
        XCTAssertEqual(summary.counts["skipped"], 0, "every test ran, Sign in with Apple too:\n\(out)")
        XCTAssertEqual(summary.failed, [], out)
        XCTAssertGreaterThanOrEqual(summary.counts["tests"] ?? 0, 18, out)
        XCTAssertEqual(summary.counts["pass"], summary.counts["tests"], out)
        for name in [
            "signs up, signs in with the same password, and reads the account",
            "refreshes the tokens, and a refused access token is refreshed on its own",
            "signs out: the session is revoked on the server and forgotten here",
            "validates, redeems a free period on the web, awaits it and sees the entitlement",
            "an unknown code is refused as notFound by validate and by redeem",
            "a used-up coupon is refused as exhausted",
            "bad input is an error with the server's code and field",
            "signs in with Apple through the redirect flow and the one-time code",
            "every example body of the document decodes with the client's parsers",
            "calls refused together share one refresh",
            "verifies the email with the mailed code",
            "resets a forgotten password with the mailed code and signs in",
            "a webOnly refusal carries the redeem page, and its absence still reads",
        ] {
            XCTAssertTrue(summary.passed.contains(name), "\(name) did not pass:\n\(out)")
        }
    }

    /// The page imports the checked-in `redeem-client.js`: it must be what tsc makes of the
    /// sources now (`Clients/web/build.sh` writes it), and what the gateway serves.
    func testTheRedeemPageServesTheClientTscMakes() async throws {
        let made = try String(contentsOf: Self.compiled.appendingPathComponent("src/index.js"), encoding: .utf8)
        let asset = Project.root.appendingPathComponent(
            "Services/gateway/GatewayService/Assets/redeem/redeem-client.js")
        let checkedIn = try String(contentsOf: asset, encoding: .utf8)
        XCTAssertTrue(made == checkedIn, "Assets/redeem/redeem-client.js is stale: run Clients/web/build.sh")
        let served = try await Self.stack.client.get("/redeem/client.js")
        XCTAssertEqual(served.status, 200)
        XCTAssertEqual(served.header("Content-Type"), "text/javascript; charset=utf-8")
        XCTAssertTrue(served.text == checkedIn, "the gateway serves the client as built")
        let script = try await Self.stack.client.get("/redeem/app.js")
        XCTAssertTrue(script.text.contains(#"from "/redeem/client.js""#), "the page's script imports the client")
        XCTAssertFalse(script.text.contains("fetch("), "the page makes no request of its own")
    }
}
