import Foundation

/// The JSON text `TextJSONDecoder` reads, checked against RFC 8259's grammar and laid out as a flat
/// list of tokens: a container's token is followed by its members' (an object's as key, value, key,
/// value …), and each token knows where the next one outside it starts, so a lookup skips whole
/// values without reading them again.
///
/// It takes only text Foundation's `JSONDecoder` reads alike: anything else (bytes that are not
/// JSON, a `\u` escape of a surrogate, nesting beyond `maxDepth`, a top-level value that is not an
/// object or an array, a byte order mark) makes `init` fail, and Foundation reads the text instead,
/// with its own answer and errors.
struct JSONTokens {
    enum Kind: UInt8 { case object, array, string, number, bool, null }

    struct Token {
        var kind: Kind
        /// A string: it holds an escape (its bytes are not its value). A number: it is an integer
        /// (no fraction, no exponent, not `-0`). A bool: its value.
        var flag: Bool
        /// A string: it holds a byte above ASCII (as a key, it may equal another text that is
        /// canonically equivalent, as Swift's `String` compares).
        var wide = false
        /// A string's bytes between its quotes, a number's text.
        var start: Int32
        var end: Int32
        /// The index of the first token after this one and everything inside it.
        var next: Int32
        /// An object's members (pairs) or an array's elements.
        var count: Int32
    }

    static let maxDepth = 64

    let bytes: [UInt8]
    private(set) var tokens: [Token] = []

    init?(_ bytes: [UInt8]) {
        guard bytes.count < Int(Int32.max) else { return nil }
        self.bytes = bytes
        tokens.reserveCapacity(bytes.count / 8 + 4)
        var at = 0
        skipSpace(&at)
        guard at < bytes.count, bytes[at] == UInt8(ascii: "{") || bytes[at] == UInt8(ascii: "[") else { return nil }
        guard value(&at, depth: 0) else { return nil }
        skipSpace(&at)
        guard at == bytes.count else { return nil }
    }

    private func skipSpace(_ at: inout Int) {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return
            }
        }
    }

    private mutating func append(_ kind: Kind, _ flag: Bool, _ start: Int, _ end: Int, wide: Bool = false) {
        let next = Int32(tokens.count + 1)
        tokens.append(
            Token(kind: kind, flag: flag, wide: wide, start: Int32(start), end: Int32(end), next: next, count: 0))
    }

    private mutating func value(_ at: inout Int, depth: Int) -> Bool {
        guard at < bytes.count else { return false }
        switch bytes[at] {
        case UInt8(ascii: "{"): return container(&at, depth: depth, object: true)
        case UInt8(ascii: "["): return container(&at, depth: depth, object: false)
        case UInt8(ascii: "\""): return string(&at)
        case UInt8(ascii: "t"): return literal(&at, "true", .bool, true)
        case UInt8(ascii: "f"): return literal(&at, "false", .bool, false)
        case UInt8(ascii: "n"): return literal(&at, "null", .null, false)
        default: return number(&at)
        }
    }

    private mutating func container(_ at: inout Int, depth: Int, object: Bool) -> Bool {
        guard depth < Self.maxDepth else { return false }
        let me = tokens.count
        append(object ? .object : .array, false, at, at)
        at += 1
        skipSpace(&at)
        let close = UInt8(ascii: object ? "}" : "]")
        var count: Int32 = 0
        if at < bytes.count, bytes[at] == close {
            at += 1
        } else {
            while true {
                if object {
                    guard at < bytes.count, bytes[at] == UInt8(ascii: "\""), string(&at) else { return false }
                    skipSpace(&at)
                    guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { return false }
                    at += 1
                    skipSpace(&at)
                }
                guard value(&at, depth: depth + 1) else { return false }
                count += 1
                skipSpace(&at)
                guard at < bytes.count else { return false }
                if bytes[at] == close {
                    at += 1
                    break
                }
                guard bytes[at] == UInt8(ascii: ",") else { return false }
                at += 1
                skipSpace(&at)
            }
        }
        tokens[me].count = count
        tokens[me].next = Int32(tokens.count)
        tokens[me].end = Int32(at)
        return true
    }

    private mutating func literal(_ at: inout Int, _ text: StaticString, _ kind: Kind, _ flag: Bool) -> Bool {
        let n = text.utf8CodeUnitCount
        guard at + n <= bytes.count else { return false }
        for i in 0..<n where bytes[at + i] != text.utf8Start[i] { return false }
        append(kind, flag, at, at + n)
        at += n
        return true
    }

    private mutating func string(_ at: inout Int) -> Bool {
        let start = at + 1
        var i = start
        var escaped = false, wide = false
        while true {
            guard i < bytes.count else { return false }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { break }
            if b < 0x20 { return false }
            if b >= 0x80 { wide = true }
            if b == UInt8(ascii: "\\") {
                escaped = true
                guard i + 1 < bytes.count else { return false }
                switch bytes[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 2
                case UInt8(ascii: "u"):
                    guard let scalar = hex4(i + 2), !(0xD800...0xDFFF).contains(scalar) else { return false }
                    i += 6
                default:
                    return false
                }
                continue
            }
            i += 1
        }
        if wide, String(validating: bytes[start..<i], as: UTF8.self) == nil { return false }
        append(.string, escaped, start, i, wide: wide)
        at = i + 1
        return true
    }

    private func hex4(_ at: Int) -> UInt32? {
        guard at + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for b in bytes[at..<at + 4] {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = v << 4 | UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = v << 4 | UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = v << 4 | UInt32(b - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
        return v
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number(_ at: inout Int) -> Bool {
        let start = at
        var i = at
        func digits() -> Int {
            let from = i
            while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
            return i - from
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        let n = digits()
        guard n > 0, n == 1 || bytes[intStart] != UInt8(ascii: "0") else { return false }
        var integer = !(n == 1 && bytes[intStart] == UInt8(ascii: "0") && intStart > start)  // "-0"
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { return false }
            integer = false
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return false }
            integer = false
        }
        append(.number, integer, start, i)
        at = i
        return true
    }

    // MARK: - Reading tokens

    /// A string token's value.
    func string(_ t: Token) -> String {
        let range = Int(t.start)..<Int(t.end)
        guard t.flag else { return String(decoding: bytes[range], as: UTF8.self) }
        var out = [UInt8]()
        out.reserveCapacity(range.count)
        var i = range.lowerBound
        while i < range.upperBound {
            let b = bytes[i]
            guard b == UInt8(ascii: "\\") else {
                out.append(b)
                i += 1
                continue
            }
            switch bytes[i + 1] {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                // Checked when scanned: four hex digits, not a surrogate.
                out.append(contentsOf: String(Character(Unicode.Scalar(hex4(i + 2)!)!)).utf8)
                i += 6
                continue
            default: out.append(bytes[i + 1])
            }
            i += 2
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An integer token's value, if it is one and fits 64 bits (signed or not).
    func integer(_ t: Token) -> (negative: Bool, magnitude: UInt64)? {
        guard t.kind == .number, t.flag else { return nil }
        var i = Int(t.start)
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var v: UInt64 = 0
        while i < Int(t.end) {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(bytes[i] - UInt8(ascii: "0")))
            if o1 || o2 { return nil }
            v = s
            i += 1
        }
        return (negative, v)
    }

    /// Where `key`'s value is in the object at `object`: `.found` with its index, `.absent`, or
    /// `.foreign` for a key name above ASCII, which only Foundation compares as it compares
    /// `String`s. The object's keys are ASCII without escapes (`hasRepeatedKeys`), so a key is found
    /// by its bytes.
    enum Lookup { case found(Int), absent, foreign }

    func member(_ key: String, of object: Int) -> Lookup {
        var key = key
        return key.withUTF8 { k in
            for byte in k where byte >= 0x80 { return .foreign }
            return bytes.withUnsafeBufferPointer { b in
                var t = object + 1
                for _ in 0..<tokens[object].count {
                    let token = tokens[t]
                    if Int(token.end - token.start) == k.count,
                       k.isEmpty || memcmp(b.baseAddress! + Int(token.start), k.baseAddress!, k.count) == 0 {
                        return .found(t + 1)
                    }
                    t = Int(tokens[t + 1].next)
                }
                return .absent
            }
        }
    }

    /// Whether the object's keys may not be told apart byte for byte: two keys are the same text
    /// (Foundation keeps the first), or a key holds an escape or a byte above ASCII (Foundation
    /// compares keys as `String`s, so "\u{212A}" is "K" to it). Such an object is left to Foundation.
    func hasRepeatedKeys(_ object: Int) -> Bool {
        let count = Int(tokens[object].count)
        guard count > 1 else { return count == 1 && (tokens[object + 1].flag || tokens[object + 1].wide) }
        guard count <= 64 else { return true }
        var keys: [Int] = []
        keys.reserveCapacity(count)
        var k = object + 1
        for _ in 0..<count {
            if tokens[k].flag || tokens[k].wide { return true }
            keys.append(k)
            k = Int(tokens[k + 1].next)
        }
        return bytes.withUnsafeBufferPointer { b in
            for x in 0..<count {
                let a = tokens[keys[x]]
                for y in (x + 1)..<count {
                    let c = tokens[keys[y]]
                    if a.end - a.start == c.end - c.start,
                       b[Int(a.start)..<Int(a.end)].elementsEqual(b[Int(c.start)..<Int(c.end)]) {
                        return true
                    }
                }
            }
            return false
        }
    }
}
