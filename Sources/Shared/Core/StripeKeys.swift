import Foundation

/// Stripe's secret keys, by the mode each serves (docs/stripe.md): a key's prefix says its
/// Stripe mode, `sk_test_…` (or a restricted `rk_test_…`) for Redeem's test mode and `sk_live_…`
/// (`rk_live_…`) for live. `REDEEM_STRIPE_SECRET_KEY` holds one key, or a test and a live key
/// separated by a comma. A test coupon is sent to Stripe with the test key only, so it never
/// reaches live Stripe; a mode without a key has no Stripe coupons.
///
/// The keys are secrets: `description` names the modes only.
public struct StripeKeys: Sendable, CustomStringConvertible {
    private let keys: [Mode: String]

    /// The modes a key is given for.
    public var modes: [Mode] { Mode.allCases.filter { keys[$0] != nil } }

    /// The key of `mode`, if one was given.
    public func key(for mode: Mode) -> String? { keys[mode] }

    public var description: String { "StripeKeys(\(modes.map(\.rawValue).joined(separator: ", ")))" }

    /// The mode a key's prefix says, nil for what is not a Stripe secret or restricted key.
    public static func mode(of key: String) -> Mode? {
        let mode: Mode
        if key.hasPrefix("sk_test_") || key.hasPrefix("rk_test_") {
            mode = .test
        } else if key.hasPrefix("sk_live_") || key.hasPrefix("rk_live_") {
            mode = .live
        } else {
            return nil
        }
        let body = key.dropFirst(8)
        guard (1...250).contains(body.count),
            body.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
        else {
            return nil
        }
        return mode
    }

    /// The keys of `text` (`variable` names the setting in errors; the keys never appear there).
    public init(text: String, variable: String = "REDEEM_STRIPE_SECRET_KEY") throws {
        var keys: [Mode: String] = [:]
        for part in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let mode = Self.mode(of: part) else {
                throw ConfigError(
                    variable: variable,
                    problem: "expected Stripe secret keys, sk_test_… and/or sk_live_…, separated by a comma")
            }
            guard keys[mode] == nil else {
                throw ConfigError(
                    variable: variable,
                    problem: "holds two \(mode.rawValue) keys; give at most one test and one live key")
            }
            keys[mode] = part
        }
        guard !keys.isEmpty else { throw ConfigError(variable: variable, problem: "is empty") }
        self.keys = keys
    }
}
