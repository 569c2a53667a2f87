internal import CZeroMQ
import Core
import Foundation

/// A CURVE key pair, as Z85 text (40 characters for 32 bytes). Its description shows only the
/// public key.
public struct CurveKeyPair: Sendable, CustomStringConvertible {
    public let publicKey: String
    /// Never logged; written only by the key tool (`redeem-keys`).
    public let secretKey: String

    /// A new key pair from libzmq (libsodium underneath).
    public static func generate() throws -> CurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41), secretKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicKey, &secretKey) == 0 else { throw ZMQError.last("curve_keypair") }
        return CurveKeyPair(checkedPublic: z85Text(publicKey), secret: z85Text(secretKey))
    }

    /// The pair of a secret key, its public half derived from it. Throws on a malformed key.
    public init(secretKey: String) throws {
        guard CurveKeyPair.isKey(secretKey) else { throw ZMQError(errno: EINVAL, operation: "curve secret key") }
        var publicKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicKey, secretKey) == 0 else { throw ZMQError.last("curve_public") }
        self.init(checkedPublic: CurveKeyPair.z85Text(publicKey), secret: secretKey)
    }

    private init(checkedPublic: String, secret: String) {
        publicKey = checkedPublic
        secretKey = secret
    }

    public var description: String { "CurveKeyPair(public: \(publicKey))" }

    /// Whether `text` is a key in Z85: 40 characters of its alphabet.
    public static func isKey(_ text: String) -> Bool { bytes(text) != nil }

    /// The 32 bytes of a Z85 key; nil when it is not one.
    static func bytes(_ text: String) -> Data? {
        guard text.utf8.count == 40 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        return zmq_z85_decode(&bytes, text) == nil ? nil : Data(bytes)
    }

    /// The 40 characters libzmq wrote into a 41-byte buffer (the last is its NUL).
    private static func z85Text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The Z85 text of a 32-byte key (a ZAP request carries the client's key as bytes).
    static func z85(_ key: Data) -> String? {
        guard key.count == 32 else { return nil }
        var text = [CChar](repeating: 0, count: 41)
        let done = key.withUnsafeBytes { zmq_z85_encode(&text, $0.bindMemory(to: UInt8.self).baseAddress, 32) }
        return done == nil ? nil : z85Text(text)
    }
}

/// The public keys of the bus, each with a name: a service's own name for its key (a caller
/// takes the key of the service it calls from here), or any name for another client (an
/// operator's tool). A CURVE server admits a client whose key is here, under any name. A name may
/// appear more than once while a key is rotated: servers admit every key listed, and a caller
/// uses the first one listed for the service it calls.
public struct BusKeyring: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public let name: String
        public let key: String

        public init(name: String, key: String) {
            self.name = name
            self.key = key
        }
    }

    public let entries: [Entry]

    public init(_ entries: [Entry]) { self.entries = entries }

    /// Parses `name=key` items separated by commas or lines; a line that starts with `#` is a
    /// comment (Z85 has `#`, so not one that follows a key). Throws a message naming the bad
    /// item; Z85 has neither commas nor spaces, so they cannot be in a key.
    public init(parsing text: String) throws(KeyringError) {
        var entries: [Entry] = []
        for line in text.split(whereSeparator: \.isNewline) where !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") {
            for item in line.split(separator: ",") {
                let trimmed = item.trimmingCharacters(in: .whitespaces)
                guard !trimmed.isEmpty else { continue }
                guard let eq = trimmed.firstIndex(of: "="), eq != trimmed.startIndex else {
                    throw KeyringError(problem: "expected name=key, got \"\(trimmed.prefix(20))…\"")
                }
                let name = String(trimmed[..<eq]), key = String(trimmed[trimmed.index(after: eq)...])
                guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) else {
                    throw KeyringError(problem: "\"\(name.prefix(30))\" is not a name (letters, digits, - _ .)")
                }
                guard CurveKeyPair.isKey(key) else { throw KeyringError(problem: "the key of \(name) is not 40 characters of Z85") }
                entries.append(Entry(name: name, key: key))
            }
        }
        self.init(entries)
    }

    /// The key a caller uses for `service`'s servers: the first listed under its name.
    public func key(of service: String) -> String? { entries.first { $0.name == service }?.key }

    /// The name a client key is listed under, if it is admitted.
    public func name(of key: String) -> String? { entries.first { $0.key == key }?.name }

    /// The text form `init(parsing:)` reads, one entry a line.
    public var text: String { entries.map { "\($0.name)=\($0.key)\n" }.joined() }

    public struct KeyringError: Error, CustomStringConvertible {
        public let problem: String
        public var description: String { problem }
    }
}

/// How a process's bus sockets are secured.
public enum BusSecurity: Sendable {
    /// No authentication and no encryption: anything that reaches a bus port may send anything.
    /// Only when asked for (`REDEEM_BUS_SECURITY=plain`), and logged as a warning.
    case plain
    /// CurveZMQ on every socket: this process's key pair, and the bus's public keys. Servers
    /// (ROUTER, PULL, PUB) admit only clients whose key is in the keyring (the node's ZAP handler
    /// checks each); clients (DEALER, PUSH, SUB) hold the key of the service they connect to.
    case curve(CurveKeyPair, BusKeyring)
}

/// What every bus socket of a process is made with.
public struct BusOptions: Sendable {
    public var security: BusSecurity
    /// The largest message a socket takes (`ZMQ_MAXMSGSIZE`): a peer that sends more is
    /// disconnected, so one huge frame cannot exhaust a service's memory.
    public var maxMessageSize: Int
    /// How often host names in endpoints are looked up again.
    public var resolveInterval: Duration
    public var resolver: any HostResolver

    public static let defaultMaxMessageSize = 4 << 20

    public init(security: BusSecurity, maxMessageSize: Int = BusOptions.defaultMaxMessageSize,
                resolveInterval: Duration = .seconds(5), resolver: any HostResolver = SystemResolver()) {
        self.security = security
        self.maxMessageSize = maxMessageSize
        self.resolveInterval = resolveInterval
        self.resolver = resolver
    }
}
