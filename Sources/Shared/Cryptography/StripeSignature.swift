import Core
import Foundation

/// Stripe's webhook signature (docs/stripe.md): the `Stripe-Signature` header is `t=<unix
/// seconds>` and one or more `v1=<hex>` (Stripe signs with each of an endpoint's secrets while
/// one is rolled), each HMAC-SHA256 of `t.payload` under an endpoint secret (`whsec_…`). An event
/// is Stripe's when one `v1` matches one of `secrets` and `t` is within `tolerance` seconds of
/// `now` (5 minutes, as Stripe's libraries), which bounds a replay of a captured event; a replay
/// inside the window is the caller's to refuse by the event's id. Pure, with the time an input.
public enum StripeSignature {
    /// Why an event is refused, each with a stable machine code.
    public enum Failure: Error, Equatable, Sendable {
        /// No header, no `t`, or no `v1`.
        case malformed
        /// No `v1` matches any secret: not signed by Stripe for this endpoint.
        case forged
        /// `t` is more than the tolerance away from now.
        case stale

        public var code: String {
            switch self {
            case .malformed: "malformedSignature"
            case .forged: "invalidSignature"
            case .stale: "staleSignature"
            }
        }
    }

    public static let tolerance: TimeInterval = 300

    /// The signed time of a verified event, or the reason it is refused.
    @discardableResult
    public static func verify(
        payload: Data, header: String?, secrets: [String], now: Date, tolerance: TimeInterval = tolerance
    ) throws(Failure) -> Date {
        guard let header, header.utf8.count <= 4096 else { throw .malformed }
        var time: Int?
        var signatures: [[UInt8]] = []
        for item in header.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = parts[0].trimmingCharacters(in: .whitespaces),
                value = parts[1].trimmingCharacters(in: .whitespaces)
            if key == "t" {
                guard time == nil, let t = Int(value) else { throw .malformed }
                time = t
            } else if key == "v1", let bytes = hexBytes(value), bytes.count == 32 {
                signatures.append(bytes)
            }
        }
        guard let time, !signatures.isEmpty else { throw .malformed }
        let signed = Data("\(time).".utf8) + payload
        let expected = secrets.map { Crypto.hmacSHA256(key: Array($0.utf8), signed) }
        let matches = signatures.contains { given in expected.contains { Crypto.constantTimeEqual($0, given) } }
        guard matches else { throw .forged }
        let at = Date(timeIntervalSince1970: TimeInterval(time))
        guard abs(at.timeIntervalSince(now)) <= tolerance else { throw .stale }
        return at
    }

    /// The header Stripe would send with `payload` at `time` under each of `secrets`.
    public static func header(payload: Data, secrets: [String], time: Date) -> String {
        let t = Int(time.timeIntervalSince1970)
        let signed = Data("\(t).".utf8) + payload
        return (["t=\(t)"] + secrets.map { "v1=" + Crypto.hmacSHA256(key: Array($0.utf8), signed).hex }).joined(
            separator: ",")
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
