import Foundation

/// Base64url without padding (RFC 7515 §2), as JWTs use it. Works on bytes (no NSString
/// round trips: this runs for every authenticated request).
public enum Base64URL {
    public static func encode(_ bytes: some DataProtocol) -> String {
        var out = Array(Data(bytes).base64EncodedData())
        var n = out.count
        while n > 0 && out[n - 1] == UInt8(ascii: "=") { n -= 1 }
        out.removeLast(out.count - n)
        for i in 0..<out.count {
            if out[i] == UInt8(ascii: "+") { out[i] = UInt8(ascii: "-") } else if out[i] == UInt8(ascii: "/") { out[i] = UInt8(ascii: "_") }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: some StringProtocol) -> [UInt8]? { decode(bytes: text.utf8) }

    public static func decode(bytes text: some Sequence<UInt8>) -> [UInt8]? {
        var bytes = Array(text)
        for i in 0..<bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "-"): bytes[i] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[i] = UInt8(ascii: "/")
            case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "/"): return nil
            default: break
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(bytes)).map { Array($0) }
    }
}

extension Array where Element == UInt8 {
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
