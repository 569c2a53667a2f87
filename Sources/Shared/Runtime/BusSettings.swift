import Bus
import Core
import Foundation

extension BusOptions {
    /// A process's bus settings (docs/configuration.md, "The bus"). CURVE unless
    /// `REDEEM_BUS_SECURITY=plain`: then this process's secret key and the bus's public keys are
    /// required, each given in the variable or in a file it names.
    public init(env: Environment) throws {
        let mode = try env.choice("REDEEM_BUS_SECURITY", default: "curve", allowed: ["curve", "plain"])
        let security: BusSecurity
        if mode == "plain" {
            security = .plain
        } else {
            guard let secret = try env.valueOrFile("REDEEM_BUS_SECRET_KEY", file: "REDEEM_BUS_SECRET_KEY_FILE") else {
                throw ConfigError(variable: "REDEEM_BUS_SECRET_KEY",
                                  problem: "is required (or REDEEM_BUS_SECRET_KEY_FILE); REDEEM_BUS_SECURITY=plain turns the bus's security off")
            }
            let keys: CurveKeyPair
            do { keys = try CurveKeyPair(secretKey: secret.text) } catch {
                // Never echoed: it is the secret.
                throw ConfigError(variable: secret.variable, problem: "is not a CURVE secret key (40 characters of Z85)")
            }
            guard let listed = try env.valueOrFile("REDEEM_BUS_PUBLIC_KEYS", file: "REDEEM_BUS_PUBLIC_KEYS_FILE") else {
                throw ConfigError(variable: "REDEEM_BUS_PUBLIC_KEYS",
                                  problem: "is required (or REDEEM_BUS_PUBLIC_KEYS_FILE): name=key for each service and client of the bus")
            }
            let keyring: BusKeyring
            do { keyring = try BusKeyring(parsing: listed.text) } catch {
                throw ConfigError(variable: listed.variable, problem: error.problem)
            }
            guard !keyring.entries.isEmpty else { throw ConfigError(variable: listed.variable, problem: "lists no key") }
            security = .curve(keys, keyring)
        }
        let hosts = env.raw("REDEEM_BUS_HOSTS_FILE")
        self.init(security: security,
                  maxMessageSize: try env.int("REDEEM_BUS_MAX_MESSAGE_BYTES", default: BusOptions.defaultMaxMessageSize, range: 65_536...(1 << 30)),
                  resolveInterval: .milliseconds(try env.int("REDEEM_BUS_RESOLVE_MS", default: 5000, range: 100...3_600_000)),
                  resolver: hosts.map { HostsFileResolver(path: $0) } ?? SystemResolver())
    }
}
