import Foundation
import Synchronization

/// `JSONDecoder.wire()` (every HTTP body the gateway reads) and the access token's claims:
/// Foundation's decoder, whose `decode` reads the text itself first (`JSONTokens`). Foundation's
/// `JSONDecoder` costs several microseconds a call whatever the size of the text (5.8 µs of a hot
/// reservation's body, 8.7 µs of its token's claims: docs/performance.md), most of it in its
/// containers and the generic lookups behind them.
///
/// What this reader answers is what Foundation would: every value it hands a type's
/// `init(from:)` is the one Foundation's decoder would hand it, and anything it does not take on
/// (text Foundation reads otherwise or refuses, a type it special-cases, a missing key, a wrong
/// type, any error at all) marks the read as failed, and Foundation decodes the text again from
/// the start, with its own answer and errors. A failed read is never half-used: a type that
/// catches an error and carries on still sends the whole text to Foundation (`TextJSONDecoderTests`
/// decodes each text with both and compares).
///
/// `@unchecked Sendable` as `JSONDecoder` is: Foundation guards its own options, and the one state
/// this subclass adds (whether it reads dates itself) is an atomic.
public final class TextJSONDecoder: JSONDecoder, @unchecked Sendable {
    /// How dates are read: ISO 8601 text (`Timestamp.decodeText`, the wire's), or left to Foundation.
    public enum Dates: Sendable { case text, foundation }
    /// Whether dates are the wire's text, read here; false once a strategy is set after `init`.
    private let readsTextDates: Atomic<Bool>
    private var dates: Dates { readsTextDates.load(ordering: .relaxed) ? .text : .foundation }

    public init(dates: Dates) {
        readsTextDates = Atomic(dates == .text)
        super.init()
        if dates == .text {
            super.dateDecodingStrategy = .custom { try Timestamp.decodeText(try $0.singleValueContainer()) }
        }
    }

    /// Dates set another way than `init`'s are Foundation's to read.
    public override var dateDecodingStrategy: DateDecodingStrategy {
        get { super.dateDecodingStrategy }
        set {
            super.dateDecodingStrategy = newValue
            readsTextDates.store(false, ordering: .relaxed)
        }
    }

    public override func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        if userInfo.isEmpty, case .useDefaultKeys = keyDecodingStrategy, !allowsJSON5,
           let value = Self.read(type, from: data, dates: dates) {
            return value
        }
        return try super.decode(type, from: data)
    }

    /// `type` read from `data` by this reader alone; nil for what Foundation must read.
    static func read<T: Decodable>(_ type: T.Type, from data: Data, dates: Dates) -> T? {
        guard let tokens = JSONTokens([UInt8](data)) else { return nil }
        let reader = Reader(tokens, dates: dates)
        guard let value = try? reader.decode(type, at: 0, base: [], key: nil), !reader.failed else { return nil }
        return value
    }

    /// The failure every error of this reader is: Foundation reads the text again.
    struct Failed: Error {}

    final class Reader {
        let tokens: JSONTokens
        let dates: Dates
        var failed = false

        init(_ tokens: JSONTokens, dates: Dates) {
            self.tokens = tokens
            self.dates = dates
        }

        func fail() -> Failed {
            failed = true
            return Failed()
        }

        func token(_ i: Int) -> JSONTokens.Token { tokens.tokens[i] }

        /// Any error on the way marks the read failed, a type's own included (an unknown enum case,
        /// a malformed UUID): Foundation, which moves past an array's element only once it is
        /// decoded, might answer a type that catches it otherwise.
        func decode<T: Decodable>(_ type: T.Type, at i: Int, base: [any CodingKey], key: (any CodingKey)?) throws -> T {
            do {
                // What Foundation's decoder reads its own way, whatever the type's `init(from:)` says.
                if T.self == Date.self, dates == .text {
                    return try Timestamp.decodeText(Value(reader: self, index: i, base: base, key: key)) as! T
                }
                if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self {
                    throw fail()
                }
                return try T(from: Decoding(reader: self, index: i, base: base, key: key))
            } catch {
                failed = true
                throw error
            }
        }

        func bool(_ i: Int) throws -> Bool {
            let t = token(i)
            guard t.kind == .bool else { throw fail() }
            return t.flag
        }

        func string(_ i: Int) throws -> String {
            let t = token(i)
            guard t.kind == .string else { throw fail() }
            return tokens.string(t)
        }

        func integer<I: FixedWidthInteger>(_ i: Int, as: I.Type) throws -> I {
            guard let (negative, magnitude) = tokens.integer(token(i)) else { throw fail() }
            if negative {
                // Down to Int64.min, whose magnitude is one more than Int64.max.
                guard magnitude <= UInt64(1) << 63, let v = I(exactly: Int64(bitPattern: 0 &- magnitude)) else {
                    throw fail()
                }
                return v
            }
            guard let v = I(exactly: magnitude) else { throw fail() }
            return v
        }

        /// A double from an integer's text of at most 15 digits, which it holds exactly; any other
        /// number is Foundation's to read.
        func double(_ i: Int) throws -> Double {
            let t = token(i)
            guard let (negative, magnitude) = tokens.integer(t), magnitude < 1_000_000_000_000_000 else { throw fail() }
            return negative ? -Double(magnitude) : Double(magnitude)
        }
    }

    /// The decoder a type's `init(from:)` is handed, for the value at `index`. Its coding path is
    /// made only when asked for.
    struct Decoding: Decoder {
        let reader: Reader
        let index: Int
        let base: [any CodingKey]
        let key: (any CodingKey)?
        var codingPath: [any CodingKey] { key.map { base + [$0] } ?? base }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard reader.token(index).kind == .object, !reader.tokens.hasRepeatedKeys(index) else {
                throw reader.fail()
            }
            return KeyedDecodingContainer(Keyed<Key>(reader: reader, object: index, codingPath: codingPath))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard reader.token(index).kind == .array else { throw reader.fail() }
            return Unkeyed(reader: reader, array: index, codingPath: codingPath)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer {
            Value(reader: reader, index: index, base: base, key: key)
        }
    }

    struct Value: SingleValueDecodingContainer {
        let reader: Reader
        let index: Int
        let base: [any CodingKey]
        let key: (any CodingKey)?
        var codingPath: [any CodingKey] { key.map { base + [$0] } ?? base }

        func decodeNil() -> Bool { reader.token(index).kind == .null }
        func decode(_ type: Bool.Type) throws -> Bool { try reader.bool(index) }
        func decode(_ type: String.Type) throws -> String { try reader.string(index) }
        func decode(_ type: Double.Type) throws -> Double { try reader.double(index) }
        func decode(_ type: Float.Type) throws -> Float { throw reader.fail() }
        func decode(_ type: Int.Type) throws -> Int { try reader.integer(index, as: type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try reader.integer(index, as: type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try reader.integer(index, as: type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try reader.integer(index, as: type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try reader.integer(index, as: type) }
        func decode(_ type: UInt.Type) throws -> UInt { try reader.integer(index, as: type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try reader.integer(index, as: type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try reader.integer(index, as: type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try reader.integer(index, as: type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try reader.integer(index, as: type) }
        func decode(_ type: Int128.Type) throws -> Int128 { throw reader.fail() }
        func decode(_ type: UInt128.Type) throws -> UInt128 { throw reader.fail() }
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try reader.decode(type, at: index, base: base, key: key)
        }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let reader: Reader
        let object: Int
        let codingPath: [any CodingKey]

        /// In the text's order, where Foundation's are in its dictionary's. Keys that name the same
        /// number in two ways ("1", "01") are Foundation's to choose between.
        var allKeys: [Key] {
            var keys: [Key] = []
            var k = object + 1
            for _ in 0..<reader.token(object).count {
                let text = reader.tokens.string(reader.token(k))
                if let key = Key(stringValue: text) {
                    if let n = key.intValue, String(n) != text { reader.failed = true }
                    keys.append(key)
                }
                k = Int(reader.token(k + 1).next)
            }
            return keys
        }

        /// The index of `key`'s value; a key name above ASCII is Foundation's to compare.
        private func find(_ key: Key) -> Int? {
            switch reader.tokens.member(key.stringValue, of: object) {
            case .found(let i): return i
            case .absent: return nil
            case .foreign:
                reader.failed = true
                return nil
            }
        }

        func contains(_ key: Key) -> Bool { find(key) != nil }

        private func member(_ key: Key) throws -> Int {
            guard let i = find(key) else { throw reader.fail() }
            return i
        }

        private func integer<I: FixedWidthInteger>(_ key: Key, _ type: I.Type) throws -> I {
            try reader.integer(try member(key), as: type)
        }

        func decodeNil(forKey key: Key) throws -> Bool { reader.token(try member(key)).kind == .null }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try reader.bool(try member(key)) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try reader.string(try member(key)) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try reader.double(try member(key)) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { throw reader.fail() }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(key, type) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key, type) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key, type) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key, type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(key, type) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key, type) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key, type) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key, type) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key, type) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key, type) }
        func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { throw reader.fail() }
        func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { throw reader.fail() }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try reader.decode(type, at: try member(key), base: codingPath, key: key)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey> {
            try Decoding(reader: reader, index: try member(key), base: codingPath, key: key).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try Decoding(reader: reader, index: try member(key), base: codingPath, key: key).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { throw reader.fail() }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw reader.fail() }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let reader: Reader
        let codingPath: [any CodingKey]
        let count: Int?
        private(set) var currentIndex = 0
        /// The token of the element at `currentIndex`.
        private var cursor: Int

        init(reader: Reader, array: Int, codingPath: [any CodingKey]) {
            self.reader = reader
            self.codingPath = codingPath
            count = Int(reader.token(array).count)
            cursor = array + 1
        }

        var isAtEnd: Bool { currentIndex >= count! }

        /// The element's token, moving past it.
        private mutating func next() throws -> Int {
            guard !isAtEnd else { throw reader.fail() }
            let i = cursor
            cursor = Int(reader.token(i).next)
            currentIndex += 1
            return i
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { throw reader.fail() }
            guard reader.token(cursor).kind == .null else { return false }
            _ = try next()
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try reader.bool(try next()) }
        mutating func decode(_ type: String.Type) throws -> String { try reader.string(try next()) }
        mutating func decode(_ type: Double.Type) throws -> Double { try reader.double(try next()) }
        mutating func decode(_ type: Float.Type) throws -> Float { throw reader.fail() }
        mutating func decode(_ type: Int.Type) throws -> Int { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try reader.integer(try next(), as: type) }
        mutating func decode(_ type: Int128.Type) throws -> Int128 { throw reader.fail() }
        mutating func decode(_ type: UInt128.Type) throws -> UInt128 { throw reader.fail() }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let index = currentIndex
            return try reader.decode(type, at: try next(), base: codingPath, key: ElementKey(index))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
            -> KeyedDecodingContainer<NestedKey> {
            let index = currentIndex
            return try Decoding(reader: reader, index: try next(), base: codingPath, key: ElementKey(index))
                .container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let index = currentIndex
            return try Decoding(reader: reader, index: try next(), base: codingPath, key: ElementKey(index))
                .unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder { throw reader.fail() }
    }

    /// An array element's place in a coding path, as Foundation names it ("Index 3").
    struct ElementKey: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue!)" }
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.intValue = intValue }
    }
}
