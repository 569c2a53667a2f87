import Core
import Cryptography
import Foundation

/// The mails accounts sends, as whole RFC 5322 messages (plain text, UTF-8, CRLF line ends). They
/// carry a code to type or paste, not a link: a link would need the public address of a page,
/// and one built from a request's `Host` header lets anyone who asks for a reset point it elsewhere.
enum MailMessage {
    static func carrying(_ token: String, purpose: EmailTokens.Purpose, to recipient: String, from: String, now: Date = Date()) -> [UInt8] {
        let (subject, lines): (String, [String])
        switch purpose {
        case .verifyEmail:
            subject = "Confirm your email address"
            lines = ["Someone, hopefully you, asked to confirm this address for their account.", "",
                     "Your confirmation code:", "", "    \(token)", "",
                     "Enter it in the app. It works once, within 24 hours.",
                     "If you did not ask for this, you can ignore this mail."]
        case .resetPassword:
            subject = "Reset your password"
            lines = ["Someone, hopefully you, asked to reset the password of the account with this address.", "",
                     "Your reset code:", "", "    \(token)", "",
                     "Enter it in the app with your new password. It works once, within an hour,",
                     "and signs out every device signed in to the account.",
                     "If you did not ask for this, you can ignore this mail: your password stays as it is."]
        }
        return message(subject: subject, lines: lines, to: recipient, from: from, now: now)
    }

    /// A member's invitation. Unlike the codes it carries a link: only an admin asks for one, and
    /// the link is the dashboard's address as that admin reached it.
    static func invitation(url: String, role: Role, to recipient: String, from: String, now: Date = Date()) -> [UInt8] {
        message(
            subject: "You are invited to the Redeem dashboard",
            lines: [
                "You are invited to the Redeem dashboard, with the role \(role.rawValue).", "",
                "Open this link to choose your password and sign in:", "", "    \(url)", "",
                "It works once, within \(Int(MemberStore.inviteTTL / 3_600)) hours.",
                "If you did not expect this invitation, you can ignore this mail.",
            ],
            to: recipient, from: from, now: now)
    }

    private static func message(
        subject: String, lines: [String], to recipient: String, from: String, now: Date
    ) -> [UInt8] {
        let domain = from.split(separator: "@").last.map(String.init) ?? "localhost"
        let headers = [
            "From: <\(from)>",
            "To: <\(recipient)>",
            "Subject: \(subject)",
            "Date: \(date(now))",
            "Message-ID: <\(UUID().uuidString.lowercased())@\(domain)>",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: 8bit",
            // Not a mail to answer, nor one to trigger an away message.
            "Auto-Submitted: auto-generated",
        ]
        return Array((headers + [""] + lines).joined(separator: "\r\n").appending("\r\n").utf8)
    }

    /// RFC 5322 `Date`, in UTC.
    static func date(_ d: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        return f.string(from: d)
    }
}
