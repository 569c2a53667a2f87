import Foundation

/// `JSONEncoder.wire()` and `JSONEncoder.bus`: Foundation's encoder with the same options, whose
/// `encode` writes the JSON text itself, byte for byte what Foundation's writes (`JSONTextTests`
/// compares the two). Foundation's `JSONEncoder` builds a tree of boxed values, then a dictionary
/// per object, and sorts and writes them; on Linux that was 15 µs for one redemption, the largest
/// single cost of coupons' answer to a reservation (docs/performance.md).
///
/// Anything this writer does not take on (a number that is not finite, a `Decimal`, a value that
/// encodes nothing, a container asked for twice in two shapes, an encoder carrying `userInfo`)
/// is encoded again by Foundation, which then answers as it always did, errors included.
public final class TextJSONEncoder: JSONEncoder, @unchecked Sendable {
    let dates: JSONText.Dates
    let escapeSlashes: Bool

    /// Foundation's options are set from the same two (`JSONText.configure`), so what falls back
    /// to Foundation is written alike.
    init(dates: JSONText.Dates, escapeSlashes: Bool) {
        self.dates = dates
        self.escapeSlashes = escapeSlashes
        super.init()
        JSONText.configure(self, dates: dates, escapeSlashes: escapeSlashes)
    }

    public override func encode<T: Encodable>(_ value: T) throws -> Data {
        if userInfo.isEmpty, let text = JSONText.encode(value, dates: dates, escapeSlashes: escapeSlashes) {
            return text
        }
        return try super.encode(value)
    }
}

/// A type that writes its own JSON text for `JSONEncoder.wire()` and `.bus`: byte for byte what its
/// `Codable` conformance writes there, keys in the order their bytes sort, without the containers
/// and the generic calls behind them. For the values written on every request (a redemption: 7 µs
/// of coupons' CPU per reservation through `Codable`). Nested in another value, it is written
/// through `Codable`; a `writeJSON` that throws leaves the value to `Codable` too.
public protocol JSONTextWriting: Encodable {
    func writeJSON(_ object: inout JSONText.Object) throws
}

/// An array of values that write their own text, written as one.
public protocol JSONTextWritingElements {
    func writeJSON(dates: JSONText.Dates, escapeSlashes: Bool) -> Data?
}

extension Array: JSONTextWritingElements where Element: JSONTextWriting {
    public func writeJSON(dates: JSONText.Dates, escapeSlashes: Bool) -> Data? {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, element) in enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            var object = JSONText.Object(dates: dates, escapeSlashes: escapeSlashes, into: out)
            guard (try? element.writeJSON(&object)) != nil else { return nil }
            out = object.closed()
        }
        out.append(UInt8(ascii: "]"))
        return Data(out)
    }
}

public enum JSONText {
    /// How dates are written: ISO 8601 text with milliseconds (`Timestamp.iso8601`, the wire's), or
    /// a number of Unix milliseconds (`.millisecondsSince1970`, the bus's).
    public enum Dates: Sendable { case text, milliseconds }

    /// Gives a Foundation encoder the options this writer follows: the same dates and slashes,
    /// and keys sorted (the order this writer always uses).
    public static func configure(_ encoder: JSONEncoder, dates: Dates, escapeSlashes: Bool) {
        switch dates {
        case .text:
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var c = encoder.singleValueContainer()
                try c.encode(Timestamp.iso8601(date))
            }
        case .milliseconds:
            encoder.dateEncodingStrategy = .millisecondsSince1970
        }
        encoder.outputFormatting = escapeSlashes ? [.sortedKeys] : [.withoutEscapingSlashes, .sortedKeys]
    }

    /// The JSON text of `value`, keys sorted by their UTF-8 bytes; nil for what Foundation must
    /// encode instead.
    public static func encode<T: Encodable>(_ value: T, dates: Dates, escapeSlashes: Bool) -> Data? {
        if let own = value as? any JSONTextWriting {
            var object = Object(dates: dates, escapeSlashes: escapeSlashes)
            if (try? own.writeJSON(&object)) != nil { return object.finished() }
        } else if let own = value as? any JSONTextWritingElements,
            let text = own.writeJSON(dates: dates, escapeSlashes: escapeSlashes)
        {
            return text
        }
        let writer = Writer(dates: dates, escapeSlashes: escapeSlashes)
        guard let root = try? writer.value(value, parent: [], key: nil, nothingIsEmptyObject: false), !writer.failed
        else {
            return nil
        }
        if case .node(let node) = root, node.kind == .none { return nil }  // Foundation: "did not encode any values"
        return Data(writer.text(of: root))
    }

    /// Something this writer leaves to Foundation.
    struct Unsupported: Error {}

    /// One object's text, written member by member by a type that writes its own
    /// (`JSONTextWriting`), in the order the keys sort by their bytes.
    public struct Object {
        let dates: Dates
        let escapeSlashes: Bool
        var out: [UInt8]
        /// Where this object's first member goes (an object nested in place starts later).
        private var start: Int
        #if DEBUG
            private var lastKey: [UInt8] = []
        #endif

        init(dates: Dates, escapeSlashes: Bool, into out: [UInt8] = []) {
            self.dates = dates
            self.escapeSlashes = escapeSlashes
            self.out = out
            if out.isEmpty { self.out.reserveCapacity(512) }
            self.out.append(UInt8(ascii: "{"))
            start = self.out.count
        }

        private mutating func key(_ key: StaticString) {
            let bytes = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
            #if DEBUG
                precondition(lastKey.lexicographicallyPrecedes(bytes), "keys out of order at \(key)")
                lastKey = Array(bytes)
            #endif
            if out.count > start { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }

        public mutating func string(_ key: StaticString, _ value: String) {
            self.key(key)
            JSONText.string(value, escapeSlashes: escapeSlashes, into: &out)
        }

        /// A string, or `null` (an optional written with `encode`, not `encodeIfPresent`).
        public mutating func string(_ key: StaticString, _ value: String?) {
            if let value { string(key, value) } else { null(key) }
        }

        public mutating func int<I: FixedWidthInteger>(_ key: StaticString, _ value: I) {
            self.key(key)
            out.append(contentsOf: value.description.utf8)
        }

        /// As `Codable` writes a `Double` here: its `description`, less a trailing `.0`.
        public mutating func double(_ key: StaticString, _ value: Double) throws {
            guard let text = JSONText.number(value) else { throw Unsupported() }
            self.key(key)
            out.append(contentsOf: text.utf8)
        }

        public mutating func bool(_ key: StaticString, _ value: Bool) {
            self.key(key)
            out.append(contentsOf: (value ? "true" : "false").utf8)
        }

        public mutating func null(_ key: StaticString) {
            self.key(key)
            out.append(contentsOf: "null".utf8)
        }

        /// As `Codable` writes a UUID here (upper case, `UUID+Wire`).
        public mutating func uuid(_ key: StaticString, _ value: UUID) {
            string(key, value.uppercasedString)
        }

        public mutating func date(_ key: StaticString, _ value: Date) throws {
            switch dates {
            case .text: string(key, Timestamp.iso8601(value))
            case .milliseconds: try double(key, 1000.0 * value.timeIntervalSince1970)
            }
        }

        /// A value that writes its own text, written in place.
        public mutating func object(_ key: StaticString, _ value: some JSONTextWriting) throws {
            self.key(key)
            var inner = Object(dates: dates, escapeSlashes: escapeSlashes, into: [])
            swap(&inner.out, &out)
            inner.out.append(UInt8(ascii: "{"))
            inner.start = inner.out.count
            defer { swap(&inner.out, &out) }
            try value.writeJSON(&inner)
            inner.out.append(UInt8(ascii: "}"))
        }

        /// Any other value, written through its `Codable` conformance.
        public mutating func value<T: Encodable>(_ key: StaticString, _ value: T) throws {
            guard let text = JSONText.encode(value, dates: dates, escapeSlashes: escapeSlashes) else {
                throw Unsupported()
            }
            self.key(key)
            out.append(contentsOf: text)
        }

        /// The text so far, with this object closed.
        consuming func closed() -> [UInt8] {
            out.append(UInt8(ascii: "}"))
            return out
        }

        mutating func finished() -> Data {
            out.append(UInt8(ascii: "}"))
            return Data(out)
        }
    }

    /// What a key or an array element holds: a scalar's text (a range of `Writer.scratch`), or a
    /// container (or a value encoded through a nested encoder).
    enum Value {
        case text(Range<Int>)
        case node(Node)
    }

    /// A key of an object and what it holds; `prefix` is the key's first eight bytes as a number
    /// (`keyPrefix`), which decides most comparisons when the object's keys are sorted.
    struct Member {
        let prefix: UInt64
        let key: String
        let value: Value

        init(_ key: String, _ value: Value) {
            prefix = JSONText.keyPrefix(key)
            self.key = key
            self.value = value
        }

        /// Sorted by the keys' UTF-8 bytes, as Foundation sorts on Linux. Of two members with one
        /// key neither comes first (a stable sort keeps them in the order set).
        func precedes(_ other: Member) -> Bool {
            if prefix != other.prefix { return prefix < other.prefix }
            return key != other.key && key.utf8.lexicographicallyPrecedes(other.key.utf8)
        }
    }

    /// A value being written. A writer and its nodes belong to one `encode` call on one thread, and
    /// no access to their properties overlaps another (an object's members are read in place only
    /// once every value is set), so they are not checked for exclusive access at run time: those
    /// checks were a tenth of the writer's time (`bench/json-text` under `perf`).
    final class Node {
        enum Kind { case none, scalar, object, array }
        @exclusivity(unchecked) var kind = Kind.none
        @exclusivity(unchecked) var scalar: Range<Int> = 0..<0
        /// An object's members, in the order they were set.
        @exclusivity(unchecked) var members: [Member] = []
        /// An array's elements.
        @exclusivity(unchecked) var items: [Value] = []

        func becomeObject() throws {
            switch kind {
            case .object: return
            case .none:
                kind = .object
                members.reserveCapacity(16)
            case .scalar, .array: throw Unsupported()
            }
        }

        func becomeArray() throws {
            switch kind {
            case .array: return
            case .none: kind = .array
            case .scalar, .object: throw Unsupported()
            }
        }

        /// A key's value; a later one for the same key replaces it when written (as Foundation's
        /// dictionary does).
        func set(_ key: String, _ value: Value) {
            members.append(Member(key, value))
        }
    }

    /// Builds the values' nodes, then their text (`text(of:)`); unchecked as `Node` is.
    final class Writer {
        let dates: Dates
        let escapeSlashes: Bool
        /// Every scalar's text, escaped and quoted as it will be written.
        @exclusivity(unchecked) var scratch: [UInt8] = []
        /// Set when a value asked for something Foundation refuses (a keyed container of a node
        /// that is already an array, say): the text is not used.
        @exclusivity(unchecked) var failed = false

        init(dates: Dates, escapeSlashes: Bool) {
            self.dates = dates
            self.escapeSlashes = escapeSlashes
            scratch.reserveCapacity(256)
        }

        // MARK: Scalars, as Foundation's `JSONEncoder` writes them

        func raw(_ text: String) -> Value {
            let start = scratch.count
            scratch.append(contentsOf: text.utf8)
            return .text(start..<scratch.count)
        }

        func string(_ s: String) -> Value {
            let start = scratch.count
            JSONText.string(s, escapeSlashes: escapeSlashes, into: &scratch)
            return .text(start..<scratch.count)
        }

        /// Not finite: Foundation's error.
        func float<F: BinaryFloatingPoint & CustomStringConvertible>(_ f: F) throws -> Value {
            guard let text = JSONText.number(f) else { throw Unsupported() }
            return raw(text)
        }

        func int<I: FixedWidthInteger & CustomStringConvertible>(_ i: I) -> Value { raw(i.description) }

        func bool(_ b: Bool) -> Value { raw(b ? "true" : "false") }

        func date(_ d: Date) throws -> Value {
            switch dates {
            case .text: return string(Timestamp.iso8601(d))
            case .milliseconds: return try float(1000.0 * d.timeIntervalSince1970)
            }
        }

        /// Any value: the types Foundation's encoder writes itself (dates, data, URLs), then the
        /// value's own `encode(to:)`. One that encodes nothing is `{}`, as Foundation writes it
        /// (but at the top, where Foundation refuses it).
        /// `parent` and `key`: where the value sits, as `codingPath` tells it (made only if asked).
        func value<T: Encodable>(
            _ v: T, parent: [any CodingKey], key: (any CodingKey)?, nothingIsEmptyObject: Bool = true
        ) throws -> Value {
            // By type, not by casting every value: an optional is unwrapped by its own
            // `encode(to:)` and comes back here as its wrapped type, as Foundation's casts unwrap it.
            if T.self == String.self, let s = v as? String { return string(s) }
            if T.self == Date.self, let d = v as? Date { return try date(d) }
            if T.self == Data.self, let d = v as? Data { return string(d.base64EncodedString()) }
            if T.self == URL.self, let u = v as? URL { return string(u.absoluteString) }
            if T.self == Decimal.self { throw Unsupported() }
            let node = Node()
            try v.encode(to: NodeEncoder(writer: self, node: node, parent: parent, key: key))
            switch node.kind {
            case .scalar: return .text(node.scalar)
            case .none:
                if nothingIsEmptyObject { node.kind = .object }
                return .node(node)
            case .object, .array: return .node(node)
            }
        }

        // MARK: Writing the text

        /// The text of `root`: every node's members in key order, scalars copied from `scratch`.
        func text(of root: Value) -> [UInt8] {
            var out = [UInt8]()
            out.reserveCapacity(scratch.count + 64)
            scratch.withUnsafeBufferPointer { scratch in
                JSONText.write(root, scratch: scratch, escapeSlashes: escapeSlashes, into: &out)
            }
            return out
        }
    }

    /// Writes `value`, reading its members and elements in place (no copy of them is retained).
    static func write(
        _ value: Value, scratch: UnsafeBufferPointer<UInt8>, escapeSlashes: Bool, into out: inout [UInt8]
    ) {
        let node: Node
        switch value {
        case .text(let range):
            out.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[range]))
            return
        case .node(let n): node = n
        }
        switch node.kind {
        case .none, .scalar:
            out.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[node.scalar]))
        case .array:
            out.append(UInt8(ascii: "["))
            node.items.withUnsafeBufferPointer { items in
                for i in items.indices {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    write(items[i], scratch: scratch, escapeSlashes: escapeSlashes, into: &out)
                }
            }
            out.append(UInt8(ascii: "]"))
        case .object:
            out.append(UInt8(ascii: "{"))
            node.members.withUnsafeBufferPointer { members in
                inKeyOrder(members) { order in
                    // Of one key set more than once, the last (a stable sort keeps the order set).
                    var first = true
                    for (n, i) in order.enumerated() {
                        if n + 1 < order.count, members[order[n + 1]].key == members[i].key { continue }
                        if !first { out.append(UInt8(ascii: ",")) }
                        first = false
                        string(members[i].key, escapeSlashes: escapeSlashes, into: &out)
                        out.append(UInt8(ascii: ":"))
                        write(members[i].value, scratch: scratch, escapeSlashes: escapeSlashes, into: &out)
                    }
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// The members' positions sorted by key (`Member.precedes`), stable, handed to `body`. An
    /// object of a type has a few dozen keys at most: those are sorted in place on the stack, by
    /// insertion; a larger one (a dictionary) by the library's sort.
    static func inKeyOrder(_ members: UnsafeBufferPointer<Member>, _ body: (UnsafeBufferPointer<Int>) -> Void) {
        let count = members.count
        guard count > 32 else {
            withUnsafeTemporaryAllocation(of: Int.self, capacity: max(count, 1)) { order in
                for i in 0..<count {
                    var j = i
                    while j > 0, members[i].precedes(members[order[j - 1]]) {
                        order[j] = order[j - 1]
                        j -= 1
                    }
                    order[j] = i
                }
                body(UnsafeBufferPointer(rebasing: order[0..<count]))
            }
            return
        }
        let order = members.indices.sorted { a, b in
            members[a].precedes(members[b]) || (!members[b].precedes(members[a]) && a < b)
        }
        order.withUnsafeBufferPointer(body)
    }

    /// A number as Foundation writes it: `description`, less a trailing `.0` (`2`, not `2.0`); nil
    /// for one that is not finite.
    static func number<F: BinaryFloatingPoint & CustomStringConvertible>(_ f: F) -> String? {
        guard f.isFinite else { return nil }
        var text = f.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    /// A key's first eight UTF-8 bytes, big-endian, zero-padded: ordered as the bytes are (a
    /// key that is a prefix of another sorts first, as its padding is 0, or ties and is then
    /// compared whole). Sorting keys by it first decides most comparisons with one.
    public static func keyPrefix(_ key: String) -> UInt64 {
        if let word = key.utf8.withContiguousStorageIfAvailable(keyPrefix) { return word }
        var word: UInt64 = 0
        var n = 0
        for byte in key.utf8 {
            if n == 8 { break }
            word |= UInt64(byte) << (56 - 8 * n)
            n += 1
        }
        return word
    }

    static func keyPrefix(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var word: UInt64 = 0
        for n in 0..<min(bytes.count, 8) { word |= UInt64(bytes[n]) << (56 - 8 * n) }
        return word
    }

    /// A JSON string as Foundation writes it: `"` and `\` escaped, `/` too unless told otherwise,
    /// `\b \f \n \r \t`, other control characters as `\u00xx` (lowercase hex); the rest, UTF-8
    /// included, as is. Runs of plain bytes are copied at once.
    public static func string(_ s: String, escapeSlashes: Bool, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var copied = 0
            for i in bytes.indices {
                let byte = bytes[i]
                let escape: UInt8
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): escape = byte
                case UInt8(ascii: "/") where escapeSlashes: escape = byte
                case 0x08: escape = UInt8(ascii: "b")
                case 0x0C: escape = UInt8(ascii: "f")
                case 0x0A: escape = UInt8(ascii: "n")
                case 0x0D: escape = UInt8(ascii: "r")
                case 0x09: escape = UInt8(ascii: "t")
                case 0..<0x20: escape = 0
                default: continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<i]))
                copied = i + 1
                out.append(UInt8(ascii: "\\"))
                if escape != 0 {
                    out.append(escape)
                } else {
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

// MARK: - The Encoder and its containers

extension JSONText {
    struct NodeEncoder: Encoder, SingleValueEncodingContainer {
        let writer: Writer
        let node: Node
        let parent: [any CodingKey]
        let key: (any CodingKey)?
        var codingPath: [any CodingKey] { key.map { parent + [$0] } ?? parent }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            // A node already of another shape is Foundation's to refuse (it stops the program):
            // the failed writer is left unused, and `encode` gives the value to Foundation.
            if (try? node.becomeObject()) == nil { writer.failed = true }
            return KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, node: node, codingPath: codingPath))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if (try? node.becomeArray()) == nil { writer.failed = true }
            return UnkeyedWriter(writer: writer, node: node, codingPath: codingPath)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer { self }

        private func set(_ value: Value) throws {
            guard node.kind == .none, case .text(let range) = value else { throw Unsupported() }
            node.kind = .scalar
            node.scalar = range
        }

        private func set<T: Encodable>(nested value: T) throws {
            guard node.kind == .none else { throw Unsupported() }
            switch try writer.value(value, parent: parent, key: key) {
            case .text(let range):
                node.kind = .scalar
                node.scalar = range
            case .node(let inner):
                node.kind = inner.kind
                node.scalar = inner.scalar
                node.members = inner.members
                node.items = inner.items
            }
        }

        func encodeNil() throws { try set(writer.raw("null")) }
        func encode(_ value: Bool) throws { try set(writer.bool(value)) }
        func encode(_ value: String) throws { try set(writer.string(value)) }
        func encode(_ value: Double) throws { try set(writer.float(value)) }
        func encode(_ value: Float) throws { try set(writer.float(value)) }
        func encode(_ value: Int) throws { try set(writer.int(value)) }
        func encode(_ value: Int8) throws { try set(writer.int(value)) }
        func encode(_ value: Int16) throws { try set(writer.int(value)) }
        func encode(_ value: Int32) throws { try set(writer.int(value)) }
        func encode(_ value: Int64) throws { try set(writer.int(value)) }
        func encode(_ value: UInt) throws { try set(writer.int(value)) }
        func encode(_ value: UInt8) throws { try set(writer.int(value)) }
        func encode(_ value: UInt16) throws { try set(writer.int(value)) }
        func encode(_ value: UInt32) throws { try set(writer.int(value)) }
        func encode(_ value: UInt64) throws { try set(writer.int(value)) }
        func encode<T: Encodable>(_ value: T) throws { try set(nested: value) }
    }

    struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: Writer
        let node: Node
        let codingPath: [any CodingKey]

        private func set(_ key: Key, _ value: Value) throws {
            guard !writer.failed else { throw Unsupported() }
            node.set(key.stringValue, value)
        }

        mutating func encodeNil(forKey key: Key) throws { try set(key, writer.raw("null")) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { try set(key, writer.bool(value)) }
        mutating func encode(_ value: String, forKey key: Key) throws { try set(key, writer.string(value)) }
        mutating func encode(_ value: Double, forKey key: Key) throws { try set(key, writer.float(value)) }
        mutating func encode(_ value: Float, forKey key: Key) throws { try set(key, writer.float(value)) }
        mutating func encode(_ value: Int, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try set(key, writer.int(value)) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try set(key, writer.value(value, parent: codingPath, key: key))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type, forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            let child = Node()
            child.kind = .object
            if !writer.failed { node.set(key.stringValue, .node(child)) }
            return KeyedEncodingContainer(
                KeyedWriter<NestedKey>(writer: writer, node: child, codingPath: codingPath + [key]))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let child = Node()
            child.kind = .array
            if !writer.failed { node.set(key.stringValue, .node(child)) }
            return UnkeyedWriter(writer: writer, node: child, codingPath: codingPath + [key])
        }

        mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue, key) }

        private func superEncoder(named name: String, _ key: (any CodingKey)? = nil) -> any Encoder {
            let child = Node()
            if !writer.failed { node.set(name, .node(child)) }
            return NodeEncoder(writer: writer, node: child, parent: codingPath, key: key ?? SuperKey())
        }
    }

    struct UnkeyedWriter: UnkeyedEncodingContainer {
        let writer: Writer
        let node: Node
        let codingPath: [any CodingKey]
        var count: Int { node.items.count }

        private func append(_ value: Value) throws {
            guard !writer.failed else { throw Unsupported() }
            node.items.append(value)
        }

        mutating func encodeNil() throws { try append(writer.raw("null")) }
        mutating func encode(_ value: Bool) throws { try append(writer.bool(value)) }
        mutating func encode(_ value: String) throws { try append(writer.string(value)) }
        mutating func encode(_ value: Double) throws { try append(writer.float(value)) }
        mutating func encode(_ value: Float) throws { try append(writer.float(value)) }
        mutating func encode(_ value: Int) throws { try append(writer.int(value)) }
        mutating func encode(_ value: Int8) throws { try append(writer.int(value)) }
        mutating func encode(_ value: Int16) throws { try append(writer.int(value)) }
        mutating func encode(_ value: Int32) throws { try append(writer.int(value)) }
        mutating func encode(_ value: Int64) throws { try append(writer.int(value)) }
        mutating func encode(_ value: UInt) throws { try append(writer.int(value)) }
        mutating func encode(_ value: UInt8) throws { try append(writer.int(value)) }
        mutating func encode(_ value: UInt16) throws { try append(writer.int(value)) }
        mutating func encode(_ value: UInt32) throws { try append(writer.int(value)) }
        mutating func encode(_ value: UInt64) throws { try append(writer.int(value)) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try append(writer.value(value, parent: codingPath, key: IndexKey(count)))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type
        ) -> KeyedEncodingContainer<NestedKey> {
            let child = Node()
            child.kind = .object
            let path = codingPath + [IndexKey(count)]
            if !writer.failed { node.items.append(.node(child)) }
            return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, node: child, codingPath: path))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let child = Node()
            child.kind = .array
            let path = codingPath + [IndexKey(count)]
            if !writer.failed { node.items.append(.node(child)) }
            return UnkeyedWriter(writer: writer, node: child, codingPath: path)
        }

        mutating func superEncoder() -> any Encoder {
            let child = Node()
            let index = IndexKey(count)
            if !writer.failed { node.items.append(.node(child)) }
            return NodeEncoder(writer: writer, node: child, parent: codingPath, key: index)
        }
    }

    struct SuperKey: CodingKey {
        var stringValue: String { "super" }
        var intValue: Int? { nil }
        init() {}
        init?(stringValue: String) { nil }
        init?(intValue: Int) { nil }
    }

    struct IndexKey: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.intValue = intValue }
    }
}
