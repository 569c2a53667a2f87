import Core
import Cryptography
import Database
import Foundation
import Outbound
import Runtime
import Synchronization
import Telemetry

/// Sends the outbox's due mail (`MailOutbox`) through the SMTP server: looks every second, and at
/// once when a request wrote a mail (`nudge`). A claimed batch is sent at once, each mail within
/// the client's timeout, well inside the lease; a failure is tried again after the backoff
/// (`MailOutbox.retryDelay`) until the mail's code expires.
final class MailSender: Sendable {
    let pool: PGPool
    let logger: Logger
    let metrics: MetricsRegistry
    let client: SMTPClient
    let keyring: SecretKeyring
    /// Seconds a claimed mail is held: the SMTP timeout and a margin.
    let lease: TimeInterval
    private let doorbell = Doorbell()
    static let batch = 10
    /// When kept mail and codes were last pruned (`MailOutbox.prune`), every 10 minutes.
    private let pruned = Mutex<ContinuousClock.Instant?>(nil)

    init(pool: PGPool, logger: Logger, metrics: MetricsRegistry, client: SMTPClient, keyring: SecretKeyring) {
        self.pool = pool
        self.logger = logger
        self.metrics = metrics
        self.client = client
        self.keyring = keyring
        lease = TimeInterval(client.timeout.components.seconds) + 30
    }

    /// A mail was written: look for due mail now.
    func nudge() { doorbell.ring() }

    func run() async {
        await Periodic(every: .seconds(1), doorbell: doorbell).poll { () async -> Periodic.Next in
            let due = await claim()
            await withTaskGroup(of: Void.self) { group in
                for mail in due { group.addTask { await self.send(mail) } }
            }
            return due.isEmpty ? .pause : .again
        }
    }

    private func claim() async -> [MailOutbox.Claimed] {
        let lease = self.lease, keyring = self.keyring
        do {
            return try await pool.withConnection { c in
                let givenUp = try MailOutbox.giveUpExpired(c)
                if givenUp > 0 {
                    self.logger.warning("mail given up: its code expired before it could be sent", ["mail.count": givenUp])
                    self.count("givenUp", by: givenUp)
                }
                if self.pruneDue() { _ = try MailOutbox.prune(c) + MailLimits.prune(c) }
                return try MailOutbox.claimDue(c, limit: Self.batch, lease: lease, keyring: keyring)
            }
        } catch {
            logger.warning("mail claim failed", ["error": String(describing: error)])
            return []
        }
    }

    func send(_ mail: MailOutbox.Claimed) async {
        let fields: [String: any Sendable] = ["mail.id": mail.id.lowercasedString, "mail.kind": mail.kind.rawValue, "mail.attempts": mail.attempts]
        do {
            try await Tracer.shared.dependency("smtp", "send") {
                try await client.send(to: mail.recipient, message: mail.message)
            }
        } catch {
            let pause = MailOutbox.retryDelay(afterAttempts: mail.attempts, random: Double.random(in: 0..<1))
            count("failed")
            let why = String(describing: error)
            let retry: [String: any Sendable] = ["error": why, "retry.seconds": Int(pause.rounded(.up))]
            logger.warning("mail not sent; it is tried again", fields.merging(retry) { $1 })
            do { try await pool.withConnection { try MailOutbox.failed($0, mail, error: why, after: pause) } } catch {
                logger.warning("mail failure not recorded; it is tried again after its lease", fields)
            }
            return
        }
        do {
            count("sent")
            let recorded = try await pool.withConnection { try MailOutbox.sent($0, mail) }
            if recorded { logger.info("mail sent", fields) } else { logger.warning("mail sent after its lease ran out", fields) }
        } catch {
            logger.warning("mail sent but not recorded; it may be sent again after its lease", fields.merging(["error": String(describing: error)]) { $1 })
        }
    }

    private func pruneDue() -> Bool {
        let now = ContinuousClock.now
        return pruned.withLock { last in
            guard last.map({ now - $0 >= .seconds(600) }) ?? true else { return false }
            last = now
            return true
        }
    }

    /// `redeem_mail_total{outcome}`: attempts the server took (`sent`), attempts that failed
    /// (`failed`, tried again) and mails whose code expired unsent (`givenUp`).
    private func count(_ outcome: String, by n: Int = 1) {
        metrics.increment("redeem_mail_total", help: "Mail attempts and give-ups by outcome.", labels: ["outcome": outcome], by: Double(n))
    }
}
