import Foundation

/// Time-based one-time passwords (RFC 6238) as authenticator apps make them: HMAC-SHA1, a
/// 30-second step, 6 digits. Pure: the time comes in, so tests use the RFC's own vectors.
public struct TOTP: Sendable {
    public static let period: Int64 = 30
    public static let digits = 6
    /// Steps either side of now a code is still taken for (a phone's clock a little off).
    public static let window: Int64 = 1

    public let secret: [UInt8]

    public init(secret: [UInt8]) { self.secret = secret }

    /// A new secret: 20 random bytes, the size of an HMAC-SHA1 key (RFC 4226 §4).
    public static func newSecret() -> [UInt8] { Crypto.randomBytes(20) }

    /// The time step of `date` (`T` of RFC 6238 §4.2, with T0 = 0).
    public static func step(at date: Date, period: Int64 = period) -> Int64 {
        Int64((date.timeIntervalSince1970).rounded(.down)) / period
    }

    /// The code of one time step (RFC 4226 §5.3: dynamic truncation, then the last `digits`).
    public func code(step: Int64, digits: Int = TOTP.digits) -> String {
        let counter = (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: step) >> (56 - 8 * $0)) }
        let mac = Crypto.hmacSHA1(key: secret, counter)
        let offset = Int(mac[19] & 0x0f)
        let binary =
            (UInt32(mac[offset] & 0x7f) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8)
            | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let text = String(binary % modulus)
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// The step `code` was made for, within `window` steps of `date` and after `after` (the
    /// step a code was last taken for, so each code works once); nil when it is none of them.
    public func matchingStep(_ code: String, at date: Date, after: Int64) -> Int64? {
        guard code.count == Self.digits, code.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        let now = Self.step(at: date)
        for step in (now - Self.window)...(now + Self.window) where step > after {
            if Crypto.constantTimeEqual(Array(self.code(step: step).utf8), Array(code.utf8)) { return step }
        }
        return nil
    }

    /// The `otpauth://` URI authenticator apps read from a QR code (Google Authenticator's
    /// key URI format): the issuer, the account's label, the secret in base32.
    public func uri(issuer: String, account: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~@")
        func escape(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: allowed) ?? "" }
        return
            "otpauth://totp/\(escape(issuer)):\(escape(account))?secret=\(Base32.encode(secret))&issuer=\(escape(issuer))"
            + "&algorithm=SHA1&digits=\(Self.digits)&period=\(Self.period)"
    }
}

/// Base32 (RFC 4648 §6) without padding: how authenticator apps take a TOTP secret.
public enum Base32 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")

    public static func encode(_ bytes: [UInt8]) -> String {
        var out = "", buffer: UInt32 = 0, bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return out
    }

    /// The bytes of base32 text (upper or lower case, padding optional); nil when it is not base32.
    public static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = [], buffer: UInt32 = 0, bits = 0
        for c in text.uppercased() where c != "=" {
            guard let value = alphabet.firstIndex(of: c) else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xff))
                bits -= 8
            }
        }
        return out
    }
}
