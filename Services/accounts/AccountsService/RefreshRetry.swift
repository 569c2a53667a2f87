import Core
import Cryptography
import Foundation

/// A spent refresh token presented again. A phone whose refresh answer was lost
/// retries with the token it still holds; within the grace window, and while the token it was
/// exchanged for is still unused, the retry is answered the very pair it missed. Otherwise it is
/// a replay, and the session is revoked.
///
/// The pair is kept sealed with AES-256-GCM under a key derived (HKDF-SHA256) from the spent
/// token, which the database holds only as a SHA-256 hash: reading the tables yields neither the
/// spent token nor the pair, and only a client presenting the spent token can open it.
enum RefreshRetry {
    enum Decision: Equatable, Sendable {
        /// Answer the sealed pair again; the session lives on.
        case answerAgain
        /// A replay: revoke the session.
        case revoke
    }

    /// - Parameters:
    ///   - spentAt: when the token was exchanged, by the database's clock.
    ///   - now: the database's clock now.
    ///   - successorIsLive: the pair could be opened, its refresh token is still the session's
    ///     current one, and the session is neither revoked nor expired.
    static func decide(spentAt: Date, now: Date, window: TimeInterval, successorIsLive: Bool) -> Decision {
        guard window > 0, successorIsLive else { return .revoke }
        // A retry's transaction may begin a moment before the exchange it races commits, so a
        // slightly negative age counts as inside the window.
        return now.timeIntervalSince(spentAt) < window ? .answerAgain : .revoke
    }

    private static let label = Array("redeem refresh retry v1".utf8)

    private struct Plain: Codable {
        var accessToken: String
        var refreshToken: String
        /// Whole seconds, as `SessionTokens.expiresAt` always is.
        var expiresAt: Int64
    }

    /// The pair a rotation answered, sealed for a retry with `spentToken`, bound to its session.
    static func seal(_ tokens: SessionTokens, spentToken: String, session: UUID) throws -> [UInt8] {
        let plain = Plain(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
                          expiresAt: Int64(tokens.expiresAt.timeIntervalSince1970.rounded(.down)))
        return AESGCM.seal(Array(try JSONEncoder().encode(plain)), key: key(spentToken), aad: Array(session.lowercasedString.utf8))
    }

    /// The sealed pair, or nil unless it was sealed for this token and session.
    static func open(_ sealed: [UInt8], spentToken: String, session: UUID) -> SessionTokens? {
        guard let bytes = AESGCM.open(sealed, key: key(spentToken), aad: Array(session.lowercasedString.utf8)),
              let plain = try? JSONDecoder().decode(Plain.self, from: Data(bytes)) else { return nil }
        return SessionTokens(accessToken: plain.accessToken, refreshToken: plain.refreshToken,
                             expiresAt: Date(timeIntervalSince1970: TimeInterval(plain.expiresAt)))
    }

    private static func key(_ spentToken: String) -> [UInt8] { Crypto.hkdfSHA256(Array(spentToken.utf8), info: label) }
}
