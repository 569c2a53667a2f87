internal import CArgon2
import Core
import Foundation

/// Password hashing with argon2id (libargon2), in the PHC string format.
///
/// Parameters: t = 2 iterations, m = 19 MiB, p = 1 lane, 16-byte salt, 32-byte hash — the
/// OWASP minimum for argon2id. About 20–40 ms of one core per hash on the reference machine.
///
/// Each hash holds 19 MiB while it runs, so the async calls are bounded (`PasswordHashGate`): at
/// most `concurrency` at once, a few more waiting their turn, and beyond that `unavailable` (503,
/// try again) rather than memory the process does not have. A hash libargon2 cannot compute (its
/// memory could not be allocated) is an error too, never the end of the process.
public struct PasswordHasher: Sendable {
    public var iterations: UInt32 = 2
    public var memoryKiB: UInt32 = 19_456
    public var lanes: UInt32 = 1
    let gate: PasswordHashGate

    /// `concurrency` hashes at once (each 19 MiB), and up to `waiting` more queued behind them
    /// (default: 8 per hash at once).
    public init(concurrency: Int = 4, waiting: Int? = nil) {
        gate = PasswordHashGate(concurrency: concurrency, waiting: waiting ?? 8 * concurrency)
    }

    /// Hashes `password`; throws `unavailable` if libargon2 fails (its memory could not be allocated).
    public func hash(_ password: String) throws(ServiceError) -> String {
        let salt = Crypto.randomBytes(16)
        let pwd = Array(password.utf8)
        let encodedLength = argon2_encodedlen(iterations, memoryKiB, lanes, UInt32(salt.count), 32, Argon2_id)
        var encoded = [CChar](repeating: 0, count: encodedLength)
        let rc = argon2id_hash_encoded(iterations, memoryKiB, lanes, pwd, pwd.count, salt, salt.count, 32, &encoded, encodedLength)
        guard rc == ARGON2_OK.rawValue else { throw Self.failure(rc) }
        return encoded.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Whether `password` matches the encoded hash. Runs the full computation either way; throws
    /// `unavailable` if it could not run (its memory could not be allocated).
    public func verify(_ password: String, against encoded: String) throws(ServiceError) -> Bool {
        let pwd = Array(password.utf8)
        let rc = argon2id_verify(encoded, pwd, pwd.count)
        if rc == ARGON2_MEMORY_ALLOCATION_ERROR.rawValue { throw Self.failure(rc) }
        return rc == ARGON2_OK.rawValue
    }

    static func failure(_ rc: Int32) -> ServiceError {
        ServiceError(.unavailable, "the password could not be checked now (argon2 error \(rc)); try again in a moment")
    }

    static let busy = ServiceError(.unavailable, "too many passwords are being checked at once; try again in a moment")

    /// Hashes off Swift's cooperative threads (it blocks a core for tens of milliseconds), within
    /// the gate's bound.
    public func hashAsync(_ password: String) async throws(ServiceError) -> String {
        try await bounded { () throws(ServiceError) in try hash(password) }
    }

    public func verifyAsync(_ password: String, against encoded: String) async throws(ServiceError) -> Bool {
        try await bounded { () throws(ServiceError) in try verify(password, against: encoded) }
    }

    private func bounded<T: Sendable>(_ work: @escaping @Sendable () throws(ServiceError) -> T) async throws(ServiceError) -> T {
        guard await gate.enter() else { throw Self.busy }
        defer { gate.leave() }
        let result: Result<T, ServiceError> = await withCheckedContinuation { cont in
            PasswordHasher.queue.async { cont.resume(returning: Result { () throws(ServiceError) in try work() }) }
        }
        return try result.get()
    }

    private static let queue = DispatchQueue(label: "redeem.argon2", attributes: .concurrent)
}
