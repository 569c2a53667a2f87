import Foundation
import Glibc
import Synchronization

// Ids on the wire and in the database: random version-4 UUIDs and their lowercase text, without
// the Foundation paths that showed in profiles of every request on Linux.

extension UUID {
    /// A random (version 4) UUID from the kernel's generator (`getrandom`, through `IdRandomness`).
    /// Foundation's `UUID.random()` opens and reads /dev/urandom on every call on Linux: three
    /// system calls per request id.
    public static func random() -> UUID {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &u) { raw in
            IdRandomness.fill(raw)
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
        }
        return UUID(uuid: u)
    }

    /// A time-ordered (version 7, RFC 9562) UUID: 48 bits of Unix milliseconds, then 74 random
    /// bits. For primary keys of rows inserted at a high rate: consecutive keys land on the
    /// B-tree's rightmost page instead of a random one (fewer page splits and pages touched).
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        var u = random().uuid
        let ms = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        withUnsafeMutableBytes(of: &u) { raw in
            for i in 0..<6 { raw[i] = UInt8(truncatingIfNeeded: ms >> (8 * (5 - i))) }
            raw[6] = (raw[6] & 0x0F) | 0x70  // version 7 (the variant stays RFC 9562's)
        }
        return UUID(uuid: u)
    }

    /// Parses the 36-character text form in either case. Foundation's `UUID(uuidString:)` runs
    /// `sscanf` here, which showed in profiles of every request (tokens and rows carry UUIDs).
    public init?(parsing text: some StringProtocol) {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &u) { out -> Bool in
            var utf8 = text.utf8.makeIterator()
            var count = 0
            for position in 0..<36 {
                guard let c = utf8.next() else { return false }
                if position == 8 || position == 13 || position == 18 || position == 23 {
                    guard c == UInt8(ascii: "-") else { return false }
                    continue
                }
                let nibble: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = c - UInt8(ascii: "A") + 10
                default: return false
                }
                out[count / 2] |= count % 2 == 0 ? nibble << 4 : nibble
                count += 1
            }
            return utf8.next() == nil
        }
        guard ok else { return nil }
        self.init(uuid: u)
    }

    /// Whether this id comes before `other` in the order of their text (in either case, as
    /// PostgreSQL orders uuids): the order of their bytes, without making the text.
    public func precedes(_ other: UUID) -> Bool {
        withUnsafeBytes(of: uuid) { a in
            withUnsafeBytes(of: other.uuid) { b in memcmp(a.baseAddress!, b.baseAddress!, 16) < 0 }
        }
    }

    /// The lowercase text form (`6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11`), as the database writes it;
    /// Foundation's `uuidString` formats with `printf`.
    public var lowercasedString: String { text(digits: "0123456789abcdef") }

    /// The upper-case text form, the one JSON carries (Foundation's `Codable` for UUID writes
    /// `uuidString`), without `printf`.
    public var uppercasedString: String { text(digits: "0123456789ABCDEF") }

    private func text(digits: StaticString) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            var n = 0
            withUnsafeBytes(of: uuid) { bytes in
                for (i, b) in bytes.enumerated() {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        out[n] = UInt8(ascii: "-")
                        n += 1
                    }
                    out[n] = digits.utf8Start[Int(b >> 4)]
                    out[n + 1] = digits.utf8Start[Int(b & 0x0f)]
                    n += 2
                }
            }
            return n
        }
    }
}

// Every message and body with a UUID field reads and writes it through these: Foundation's own
// `Codable` for UUID runs `sscanf` and `snprintf` for each one, 1.5 % of all CPU while redemptions
// complete (every grant command carries two ids across three hops). Synthesised `Codable`
// conformances in modules that see these overloads pick them over the generic ones; the text is
// the same as Foundation's (upper-case out, either case in).
extension KeyedEncodingContainer {
    public mutating func encode(_ value: UUID, forKey key: Key) throws {
        try encode(value.uppercasedString, forKey: key)
    }

    public mutating func encodeIfPresent(_ value: UUID?, forKey key: Key) throws {
        guard let value else { return }
        try encode(value.uppercasedString, forKey: key)
    }
}

extension KeyedDecodingContainer {
    public func decode(_ type: UUID.Type, forKey key: Key) throws -> UUID {
        let text = try decode(String.self, forKey: key)
        guard let id = UUID(parsing: text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not a UUID")
        }
        return id
    }

    public func decodeIfPresent(_ type: UUID.Type, forKey key: Key) throws -> UUID? {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let id = UUID(parsing: text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not a UUID")
        }
        return id
    }
}

/// Random bytes for ids, read from the kernel's generator 4 kB at a time: 16 `getentropy` calls
/// per 256 UUIDs instead of two reads per UUID (every HTTP request takes one, for its request id,
/// and three words for its trace and span ids). Ids are not secrets; keys and tokens take their
/// bytes from `Crypto.randomBytes`.
public enum IdRandomness {
    private static let pool = Mutex<(bytes: [UInt8], next: Int)>(([UInt8](repeating: 0, count: 4096), 4096))

    static func fill(_ out: UnsafeMutableRawBufferPointer) {
        pool.withLock { pool in
            if pool.next + out.count > pool.bytes.count {
                pool.bytes.withUnsafeMutableBytes { readKernelRandom(into: $0) }
                pool.next = 0
            }
            pool.bytes.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[pool.next..<pool.next + out.count])) }
            // Bytes handed out are cleared, so no id's bytes stay behind in the pool.
            for i in pool.next..<pool.next + out.count { pool.bytes[i] = 0 }
            pool.next += out.count
        }
    }

    /// A random word from the pool. `UInt64.random(in:)` asks the kernel on every call (Swift's
    /// `SystemRandomNumberGenerator` is one `getrandom` each): three system calls per request for
    /// its trace and span ids alone.
    public static func word() -> UInt64 {
        var word: UInt64 = 0
        withUnsafeMutableBytes(of: &word) { fill($0) }
        return word
    }

    /// `getentropy` (the `getrandom` system call, at most 256 bytes a call): 16 calls per 4 kB.
    private static func readKernelRandom(into buffer: UnsafeMutableRawBufferPointer) {
        var done = 0
        while done < buffer.count {
            let n = min(256, buffer.count - done)
            precondition(getentropy(buffer.baseAddress! + done, n) == 0, "getentropy failed: \(errno)")
            done += n
        }
    }
}

/// The id pool as a `RandomNumberGenerator`, for `random(in:using:)` on ids (trace and span ids).
public struct IdRandom: RandomNumberGenerator {
    public init() {}
    public mutating func next() -> UInt64 { IdRandomness.word() }
}
