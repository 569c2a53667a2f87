import Core
import Cryptography
import Foundation

extension SecretKeyring {
    /// The keys accounts and grants seal their stored secrets with (docs/security.md, "Secrets at
    /// rest"): `REDEEM_SECRET_KEY` (or `_FILE`), required, seals and opens; `REDEEM_SECRET_KEY_PREVIOUS`
    /// (or `_FILE`), optional, only opens. Each is 32 random bytes in base64 (`openssl rand -base64
    /// 32`). Never echoed.
    public init(env: Environment) throws {
        guard let current = try Self.key(env, "REDEEM_SECRET_KEY", file: "REDEEM_SECRET_KEY_FILE") else {
            throw ConfigError(variable: "REDEEM_SECRET_KEY",
                              problem: "is required (or REDEEM_SECRET_KEY_FILE): 32 random bytes in base64, e.g. from `openssl rand -base64 32`")
        }
        let previous = try Self.key(env, "REDEEM_SECRET_KEY_PREVIOUS", file: "REDEEM_SECRET_KEY_PREVIOUS_FILE")
        self.init(current: current, others: previous.map { [$0] } ?? [])
    }

    private static func key(_ env: Environment, _ name: String, file: String) throws -> Key? {
        guard let given = try env.valueOrFile(name, file: file) else { return nil }
        guard let bytes = Data(base64Encoded: given.text), let key = Key(Array(bytes)) else {
            throw ConfigError(variable: given.variable, problem: "is not 32 bytes in base64 (`openssl rand -base64 32` makes one)")
        }
        return key
    }
}
