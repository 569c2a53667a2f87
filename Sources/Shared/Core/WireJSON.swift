import Foundation
import Synchronization

/// A value that crosses the bus already in its public JSON form (an HTTP body, docs/api.md): the
/// service that owns it encodes it once with the wire encoder, and the gateway sends those bytes
/// as its response, without decoding and encoding them again on the way.
///
/// The bytes travel in a frame of their own after the envelope; the envelope's JSON holds only the
/// frame's number (`"redemption": 0`). A caller says it reads frames (`Envelope.frames`); to one
/// that doesn't (an earlier version), and outside a bus message, the value travels inline, as
/// itself, and it is read that way too.
public struct WireJSON<Value: Codable & Sendable>: Codable, Sendable {
    /// The value as `JSONEncoder.wire()` writes it.
    public let bytes: Data

    public init(_ value: Value) throws {
        bytes = try JSONEncoder.wire().encode(value)
    }

    /// A value's bytes as `JSONEncoder.wire()` wrote them (a frame after the envelope).
    init(bytes: Data) { self.bytes = bytes }

    /// The value itself, for a caller that needs its fields.
    public func decoded() throws -> Value {
        try JSONDecoder.wire().decode(Value.self, from: bytes)
    }

    public func encode(to encoder: any Encoder) throws {
        guard let frames = encoder.userInfo[BusFrames.key] as? BusFrames else {
            return try decoded().encode(to: encoder)
        }
        var c = encoder.singleValueContainer()
        try c.encode(frames.append(bytes))
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        guard let number = try? c.decode(Int.self) else {
            bytes = try JSONEncoder.wire().encode(c.decode(Value.self))
            return
        }
        guard let frame = (decoder.userInfo[BusFrames.key] as? BusFrames)?[number] else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "no frame \(number) after the envelope")
        }
        bytes = frame
    }
}

/// The frames that follow an envelope in one bus message: collected while a reply is encoded,
/// read while it is decoded (through the coder's `userInfo`).
final class BusFrames: Sendable {
    static let key = CodingUserInfoKey(rawValue: "redeem.bus.frames")!

    private let frames: Mutex<(all: [Data], numbers: [Data: Int])>

    init(_ frames: [Data] = []) { self.frames = Mutex((frames, [:])) }

    /// Whether `encoder` writes a message whose caller reads frames.
    static func carried(by encoder: any Encoder) -> Bool { encoder.userInfo[key] is BusFrames }

    /// Adds a frame and answers its number. A frame equal to one added before is not added again:
    /// the answers of a batch often share one body (the validations of one code, say, differ only
    /// by reason), and a reply carries that body once, however many items point at it.
    func append(_ frame: Data) -> Int {
        frames.withLock { f in
            if let known = f.numbers[frame] { return known }
            f.all.append(frame)
            f.numbers[frame] = f.all.count - 1
            return f.all.count - 1
        }
    }

    subscript(number: Int) -> Data? {
        frames.withLock { $0.all.indices.contains(number) ? $0.all[number] : nil }
    }

    var all: [Data] { frames.withLock { $0.all } }
}

extension JSONEncoder {
    /// Encodes a bus message (`JSONEncoder.bus` options) and answers its frames: the envelope, then
    /// the `WireJSON` values it carries.
    public static func busFrames<T: Encodable>(_ value: T) throws -> [Data] {
        let frames = BusFrames()
        let encoder = JSONEncoder.makeBus()
        encoder.userInfo[BusFrames.key] = frames
        let envelope = try encoder.encode(value)
        return [envelope] + frames.all
    }
}

extension JSONDecoder {
    /// Decodes a bus message from its frames: the envelope, then the `WireJSON` values it carries.
    public static func busFrames<T: Decodable>(_ type: T.Type, from frames: some Collection<Data>) throws -> T {
        guard let envelope = frames.first else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "no frames")) }
        guard frames.count > 1 else { return try JSONDecoder.bus.decode(type, from: envelope) }
        let decoder = JSONDecoder.makeBus()
        decoder.userInfo[BusFrames.key] = BusFrames(Array(frames.dropFirst()))
        return try decoder.decode(type, from: envelope)
    }
}
