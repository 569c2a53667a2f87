internal import CArgon2
import Foundation

/// Password hashing with argon2id (libargon2), in the PHC string format.
///
/// Parameters: t = 2 iterations, m = 19 MiB, p = 1 lane, 16-byte salt, 32-byte hash — the
/// OWASP minimum for argon2id. About 20–40 ms of one core per hash on the reference machine.
public struct PasswordHasher: Sendable {
    public var iterations: UInt32 = 2
    public var memoryKiB: UInt32 = 19_456
    public var lanes: UInt32 = 1

    public init() {}

    public func hash(_ password: String) -> String {
        let salt = Crypto.randomBytes(16)
        let pwd = Array(password.utf8)
        let encodedLength = argon2_encodedlen(iterations, memoryKiB, lanes, UInt32(salt.count), 32, Argon2_id)
        var encoded = [CChar](repeating: 0, count: encodedLength)
        let rc = argon2id_hash_encoded(iterations, memoryKiB, lanes, pwd, pwd.count, salt, salt.count, 32, &encoded, encodedLength)
        precondition(rc == ARGON2_OK.rawValue, "argon2id_hash_encoded failed: \(rc)")
        return encoded.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Whether `password` matches the encoded hash. Runs the full computation either way.
    public func verify(_ password: String, against encoded: String) -> Bool {
        let pwd = Array(password.utf8)
        return argon2id_verify(encoded, pwd, pwd.count) == ARGON2_OK.rawValue
    }

    /// Runs hashing off Swift's cooperative threads (it blocks a core for tens of milliseconds).
    public func hashAsync(_ password: String) async -> String {
        await withCheckedContinuation { cont in
            PasswordHasher.queue.async { cont.resume(returning: hash(password)) }
        }
    }

    public func verifyAsync(_ password: String, against encoded: String) async -> Bool {
        await withCheckedContinuation { cont in
            PasswordHasher.queue.async { cont.resume(returning: verify(password, against: encoded)) }
        }
    }

    private static let queue = DispatchQueue(label: "redeem.argon2", attributes: .concurrent)
}
