import Foundation
import HTTP

/// What an `SMTPSink` kept, over HTTP on loopback, for a client suite written in another language
/// (Kotlin, TypeScript) that reads the code a mail carries: `GET /messages?to=<address>` answers
/// `{"messages": ["<message as sent>", …]}`, oldest first (addresses compared without case).
public final class SMTPMailbox: Sendable {
    public let sink: SMTPSink
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }
    /// The stack's settings that send its mail to the sink.
    public var environment: [String: String] {
        ["REDEEM_SMTP_URL": "smtp+insecure://127.0.0.1:\(sink.port)", "REDEEM_MAIL_FROM": "no-reply@redeem.test"]
    }

    public init() throws {
        let sink = try SMTPSink()
        self.sink = sink
        server = .fake("smtp-mailbox") { req in
            guard req.method == "GET", req.path == "/messages", let to = req.query["to"] else {
                return FakeGoogleOAuth.json(404, ["error": "GET /messages?to=<address>"])
            }
            return FakeGoogleOAuth.json(200, ["messages": sink.messages(to: to).map(\.data)])
        }
        try server.start()
    }

    public func stop() async {
        await server.stop(drainSeconds: 0.2)
        sink.stop()
    }
}
