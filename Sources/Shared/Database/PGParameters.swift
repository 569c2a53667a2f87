import Core
import Foundation

/// A statement's parameter values as libpq takes them, all in one buffer: a text value
/// NUL-terminated (format 0), a binary one with its length (format 1), a NULL as no value.
public struct PGParameters {
    private var bytes: [UInt8] = []
    /// Where each value starts in `bytes`; nil for NULL.
    private var starts: [Int?] = []
    private var lengths: [Int32] = []
    private var formats: [Int32] = []
    private var anyBinary = false

    init(_ values: [any PGBindable]) {
        starts.reserveCapacity(values.count)
        lengths.reserveCapacity(values.count)
        formats.reserveCapacity(values.count)
        for value in values { value.bind(into: &self) }
    }

    var count: Int { starts.count }

    /// A value in PostgreSQL's text format (the input function of the parameter's type reads it).
    public mutating func append(text: String?) {
        guard var text else { return appendNull() }
        starts.append(bytes.count)
        text.withUTF8 { bytes.append(contentsOf: $0) }
        bytes.append(0)
        lengths.append(0)
        formats.append(0)
    }

    /// A value in PostgreSQL's binary format (what the type's `send` function writes), written by
    /// `write` at the end of the buffer it is handed.
    public mutating func appendBinary(_ write: (inout [UInt8]) -> Void) {
        let start = bytes.count
        write(&bytes)
        starts.append(start)
        lengths.append(Int32(bytes.count - start))
        formats.append(1)
        // A value of no bytes still needs an address that is not NULL.
        bytes.append(0)
        anyBinary = true
    }

    private mutating func appendNull() {
        starts.append(nil)
        lengths.append(0)
        formats.append(0)
    }

    /// The values, their lengths and formats as libpq's `paramValues`, `paramLengths` and
    /// `paramFormats` (the last two nil when every value is text), for the duration of `body`.
    func withPointers<R>(
        _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) throws -> R
    ) rethrows -> R {
        try bytes.withUnsafeBytes { buffer in
            let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self)
            let values: [UnsafePointer<CChar>?] = starts.map { start in start.map { base! + $0 } }
            return try values.withUnsafeBufferPointer { v in
                guard anyBinary else { return try body(Int32(count), v.baseAddress, nil, nil) }
                return try lengths.withUnsafeBufferPointer { l in
                    try formats.withUnsafeBufferPointer { f in
                        try body(Int32(count), v.baseAddress, l.baseAddress, f.baseAddress)
                    }
                }
            }
        }
    }
}

/// A one-dimensional array parameter sent in PostgreSQL's binary format, which the server reads
/// element by element without parsing text (`array_in` took about 9 µs of PostgreSQL's CPU per
/// completed redemption, on the batches' arrays of ids and payloads). Its element type must be the
/// parameter's, as the statement gives it (`$1::uuid[]`, or a function's argument): the server
/// refuses another ("binary data has array element type …"). `PGArray` sends text, which any
/// array type reads.
public struct PGBinaryArray: PGBindable {
    enum Elements: Sendable {
        case uuid([UUID?])
        case text([String?])
        case bool([Bool?])
        case int8([Int64?])
        case float8([Double?])
        case timestamptz([Date?])
    }

    let elements: Elements

    /// A `uuid[]`.
    public static func uuids(_ ids: [UUID?]) -> PGBinaryArray { PGBinaryArray(elements: .uuid(ids)) }
    /// A `text[]`.
    public static func texts(_ texts: [String?]) -> PGBinaryArray { PGBinaryArray(elements: .text(texts)) }
    /// A `boolean[]`.
    public static func bools(_ values: [Bool?]) -> PGBinaryArray { PGBinaryArray(elements: .bool(values)) }
    /// A `bigint[]`.
    public static func int8s(_ values: [Int64?]) -> PGBinaryArray { PGBinaryArray(elements: .int8(values)) }
    /// A `double precision[]`.
    public static func float8s(_ values: [Double?]) -> PGBinaryArray { PGBinaryArray(elements: .float8(values)) }
    /// A `timestamptz[]`, each to the millisecond, as `Timestamp.iso8601` writes it.
    public static func timestamps(_ dates: [Date?]) -> PGBinaryArray { PGBinaryArray(elements: .timestamptz(dates)) }

    /// The same array as text (what `PGArray` sends).
    public var pgText: String? {
        switch elements {
        case .uuid(let ids): PGArray(optionals: ids.map { $0?.lowercasedString }).pgText
        case .text(let texts): PGArray(optionals: texts).pgText
        case .bool(let values): PGArray(optionals: values.map { $0.map { $0 ? "t" : "f" } }).pgText
        case .int8(let values): PGArray(optionals: values.map { $0.map { String($0) } }).pgText
        case .float8(let values): PGArray(optionals: values.map { $0.map { String($0) } }).pgText
        case .timestamptz(let dates): PGArray(optionals: dates.map { $0.map(Timestamp.iso8601) }).pgText
        }
    }

    public func bind(into parameters: inout PGParameters) {
        parameters.appendBinary { out in
            switch elements {
            case .uuid(let ids):
                Self.write(ids, type: 2950, into: &out) { id, out in
                    withUnsafeBytes(of: id.uuid) { out.append(contentsOf: $0) }
                }
            case .text(let texts):
                Self.write(texts, type: 25, into: &out) { text, out in
                    var text = text
                    text.withUTF8 { out.append(contentsOf: $0) }
                }
            case .bool(let values):
                Self.write(values, type: 16, into: &out) { value, out in out.append(value ? 1 : 0) }
            case .int8(let values):
                Self.write(values, type: 20, into: &out) { value, out in
                    Self.append(UInt64(bitPattern: value), into: &out)
                }
            case .float8(let values):
                // IEEE 754's bits, as `float8send` writes them.
                Self.write(values, type: 701, into: &out) { value, out in
                    Self.append(value.bitPattern, into: &out)
                }
            case .timestamptz(let dates):
                // Microseconds since 2000-01-01 00:00 UTC (PostgreSQL's epoch), to the millisecond.
                Self.write(dates, type: 1184, into: &out) { date, out in
                    let micros = (Timestamp.milliseconds(date) - 946_684_800_000) * 1000
                    Self.append(UInt64(bitPattern: micros), into: &out)
                }
            }
        }
    }

    /// `array_send`'s layout: dimensions (none for an empty array), whether any element is NULL,
    /// the element type's OID, the one dimension's length and lower bound (1), then each element's
    /// length (-1 for NULL) and bytes. Every integer is big-endian.
    private static func write<T>(
        _ items: [T?], type: UInt32, into out: inout [UInt8], element: (T, inout [UInt8]) -> Void
    ) {
        append(UInt32(items.isEmpty ? 0 : 1), into: &out)
        append(UInt32(items.contains { $0 == nil } ? 1 : 0), into: &out)
        append(type, into: &out)
        guard !items.isEmpty else { return }
        append(UInt32(items.count), into: &out)
        append(UInt32(1), into: &out)
        for item in items {
            guard let item else {
                append(UInt32(bitPattern: -1), into: &out)
                continue
            }
            let lengthAt = out.count
            append(UInt32(0), into: &out)
            element(item, &out)
            let length = UInt32(out.count - lengthAt - 4).bigEndian
            withUnsafeBytes(of: length) { bytes in
                for i in 0..<4 { out[lengthAt + i] = bytes[i] }
            }
        }
    }

    private static func append<I: FixedWidthInteger>(_ value: I, into out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }
}
