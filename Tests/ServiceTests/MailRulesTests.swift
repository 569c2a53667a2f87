import Foundation
import Outbound
import Testing
import TestSupport
@testable import AccountsService
@testable import Core
@testable import Runtime

/// The mail settings, the messages and the outbox's retry schedule, without a server.
@Suite struct MailRulesTests {
    @Test func withoutAnSMTPURLThereIsNoMailAndASenderAloneStopsTheStart() throws {
        #expect(try MailConfig(env: Environment([:])) == nil)
        #expect(throws: ConfigError.self) { try MailConfig(env: Environment(["REDEEM_MAIL_FROM": "no-reply@example.com"])) }
    }

    @Test func theURLIsCheckedWithoutEverEchoingIt() throws {
        for bad in ["http://user:hunter2secret@mail.example.com", "smtp://", "mail.example.com:587", "smtp://user:hunter2secret@/x"] {
            do {
                _ = try MailConfig(env: Environment(["REDEEM_SMTP_URL": bad, "REDEEM_MAIL_FROM": "no-reply@example.com"]))
                Issue.record("accepted \(bad)")
            } catch let e as ConfigError {
                #expect(e.variable == "REDEEM_SMTP_URL")
                #expect(!e.description.contains("hunter2secret"), "the password is not in the error")
            }
        }
        #expect(throws: ConfigError.self) { try MailConfig(env: Environment(["REDEEM_SMTP_URL": "smtp://mail.example.com"])) }
        #expect(throws: ConfigError.self) {
            try MailConfig(env: Environment(["REDEEM_SMTP_URL": "smtp://mail.example.com", "REDEEM_MAIL_FROM": "Redeem <no-reply@example.com>"]))
        }
    }

    @Test func credentialsRequireTLSAndAreKeptOutOfWhatLogsShow() throws {
        let authed = try #require(try MailConfig(env: Environment(["REDEEM_SMTP_URL": "smtp://apikey:hunter2%40secret@smtp.example.com:587",
                                                                  "REDEEM_MAIL_FROM": "no-reply@example.com"])))
        #expect(authed.hasCredentials)
        #expect(authed.redacted == "smtp://smtp.example.com:587")
        #expect(authed.url == "smtp://apikey:hunter2%40secret@smtp.example.com:587", "libcurl gets the URL as given")
        let open = try #require(try MailConfig(env: Environment(["REDEEM_SMTP_URL": "smtps://relay.internal", "REDEEM_MAIL_FROM": " no-reply@example.com "])))
        #expect(!open.hasCredentials)
        #expect(open.redacted == "smtps://relay.internal")
        #expect(open.from == "no-reply@example.com")
    }

    @Test func plainSMTPOnlyByNameAndOnlyToLoopback() throws {
        func config(_ url: String) throws -> MailConfig? {
            try MailConfig(env: Environment(["REDEEM_SMTP_URL": url, "REDEEM_MAIL_FROM": "no-reply@example.com"]))
        }
        #expect(try config("smtp://relay.internal")?.security == .startTLS, "no credentials: STARTTLS still required")
        #expect(try config("smtp://u:p@relay.internal:587")?.security == .startTLS)
        #expect(try config("smtps://relay.internal")?.security == .tls)
        for loopback in ["smtp+insecure://127.0.0.1:2525", "smtp+insecure://localhost", "smtp+insecure://[::1]:25", "SMTP+INSECURE://127.8.0.1"] {
            let plain = try #require(try config(loopback), "\(loopback)")
            #expect(plain.security == .none, "\(loopback)")
            #expect(plain.url.hasPrefix("smtp://"), "libcurl is given smtp://: \(plain.url)")
        }
        #expect(try config("smtp+insecure://127.0.0.1:2525")?.redacted == "smtp+insecure://127.0.0.1:2525")
        for refused in ["smtp+insecure://relay.internal", "smtp+insecure://10.0.0.5", "smtp+insecure://[::2]", "smtp+insecure://u:hunter2secret@127.0.0.1",
                        "smtp+insecure://127.0.0.1.example.com"] {
            do {
                _ = try config(refused)
                Issue.record("accepted \(refused)")
            } catch let e as ConfigError {
                #expect(e.variable == "REDEEM_SMTP_URL")
                #expect(!e.description.contains("hunter2secret"))
            }
        }
    }

    /// Against a real SMTP server that offers no STARTTLS (`SMTPSink`, loopback): `smtp://` sends
    /// nothing, even without credentials, and libcurl says why; `smtp+insecure://` delivers.
    @Test func smtpWithoutSTARTTLSSendsNothingUnlessTheURLSaysInsecure() async throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        func client(_ url: String) throws -> SMTPClient {
            SMTPClient(config: try #require(try MailConfig(env: Environment(["REDEEM_SMTP_URL": url, "REDEEM_MAIL_FROM": "no-reply@example.com"]))),
                       timeout: .seconds(10))
        }
        let message = MailMessage.carrying("ev_abc", purpose: .verifyEmail, to: "pilot@example.com", from: "no-reply@example.com")
        let startTLS = try client("smtp://127.0.0.1:\(sink.port)")
        do {
            try await startTLS.send(to: "pilot@example.com", message: message)
            Issue.record("sent in the clear")
        } catch {
            #expect(error.code == 64, "CURLE_USE_SSL_FAILED: \(error)")
        }
        #expect(sink.messages(to: "pilot@example.com").isEmpty)
        try await client("smtp+insecure://127.0.0.1:\(sink.port)").send(to: "pilot@example.com", message: message)
        #expect(sink.messages(to: "pilot@example.com").count == 1)
    }

    @Test func aMessageIsPlainTextWithCRLFLinesAndCarriesItsCode() throws {
        let text = String(decoding: MailMessage.carrying("pr_abc", purpose: .resetPassword, to: "pilot@example.com", from: "no-reply@example.com",
                                                         now: Date(timeIntervalSince1970: 0)), as: UTF8.self)
        let lines = text.components(separatedBy: "\r\n")
        #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "no bare line feed")
        #expect(text.hasSuffix("\r\n"))
        #expect(lines.contains("From: <no-reply@example.com>"))
        #expect(lines.contains("To: <pilot@example.com>"))
        #expect(lines.contains("Subject: Reset your password"))
        #expect(lines.contains("Date: Thu, 01 Jan 1970 00:00:00 +0000"))
        #expect(lines.contains { $0.hasPrefix("Message-ID: <") && $0.hasSuffix("@example.com>") })
        #expect(lines.contains("    pr_abc"))
        let blank = try #require(lines.firstIndex(of: ""))
        #expect(lines[..<blank].allSatisfy { $0.contains(": ") }, "headers, then the body")
        let verify = String(decoding: MailMessage.carrying("ev_abc", purpose: .verifyEmail, to: "p@example.com", from: "n@example.com"), as: UTF8.self)
        #expect(verify.contains("Subject: Confirm your email address"))
        #expect(verify.contains("    ev_abc"))
    }

    @Test func codesLastADayToVerifyAndAnHourToReset() {
        #expect(EmailTokens.Purpose.verifyEmail.lifetime == 86_400)
        #expect(EmailTokens.Purpose.resetPassword.lifetime == 3_600)
    }

    @Test func aFailedMailIsTriedAgainAfterADoublingPauseOfAtMostFiveMinutes() {
        #expect((1...6).map { MailOutbox.retryDelay(afterAttempts: $0, random: 0.5) } == [1, 2, 4, 8, 16, 32])
        #expect(MailOutbox.retryDelay(afterAttempts: 30, random: 0.99) == 300)
        let spread = (0..<50).map { _ in MailOutbox.retryDelay(afterAttempts: 3, random: Double.random(in: 0..<1)) }
        #expect(spread.allSatisfy { $0 >= 3.2 && $0 <= 4.8 }, "±20 %")
    }
}
