import Core
import Foundation

/// A plan once every field has passed `PlanRules`.
struct PlanDefinition: Sendable, Equatable {
    var productId: String
    var name: String
    var appStore: AppStorePlan?
    var playStore: PlayStorePlan?
    var stripe: StripePlan? = nil
}

/// The rules for a plan's fields (docs/stores.md), each violation a 422 naming its field.
enum PlanRules {
    static func invalid(_ field: String, _ message: String) -> ServiceError { ServiceError(.invalid, message, field: field) }

    /// Product ids are the plans' keys and a path segment (`/v1/plans/{productId}`): 1 to 200 of
    /// `A-Z a-z 0-9 . _ -`, which store product ids use.
    static func checkProductId(_ id: String?) throws -> String {
        guard let id else { throw invalid("productId", "productId is required") }
        guard (1...200).contains(id.utf8.count), id.unicodeScalars.allSatisfy(isIdCharacter) else {
            throw invalid("productId", "productId must be 1 to 200 of A-Z, a-z, 0-9, ., _ and -")
        }
        return id
    }

    static func checkName(_ name: String?) throws -> String {
        guard let name else { throw invalid("name", "name is required") }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...200).contains(trimmed.count) else { throw invalid("name", "name must be 1 to 200 characters") }
        return trimmed
    }

    /// App Store Connect ids are numbers (`6447245839`); up to 30 digits.
    static func checkAppStore(_ input: PlanInput.AppStore) throws -> AppStorePlan {
        guard let id = input.subscriptionId else { throw invalid("appStore.subscriptionId", "appStore.subscriptionId is required") }
        guard (1...30).contains(id.count), id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw invalid("appStore.subscriptionId", "appStore.subscriptionId must be the subscription's App Store Connect id, a number")
        }
        return AppStorePlan(subscriptionId: id)
    }

    /// Google Play's rules: a product id starts with a lowercase letter or a digit and holds
    /// lowercase letters, digits, `_` and `.`; a base plan id starts the same way and holds
    /// lowercase letters, digits and `-` (at most 63).
    static func checkPlayStore(_ input: PlanInput.PlayStore) throws -> PlayStorePlan {
        guard let id = input.productId else { throw invalid("playStore.productId", "playStore.productId is required") }
        guard (1...100).contains(id.count), startsPlay(id), id.unicodeScalars.allSatisfy({ isLowerAlnum($0) || $0 == "_" || $0 == "." }) else {
            throw invalid("playStore.productId", "playStore.productId must start with a-z or 0-9 and hold a-z, 0-9, _ and . (at most 100)")
        }
        guard let bases = input.basePlanIds, !bases.isEmpty else {
            throw invalid("playStore.basePlanIds", "playStore.basePlanIds must name at least one base plan")
        }
        guard bases.count <= 20 else { throw invalid("playStore.basePlanIds", "playStore.basePlanIds names at most 20 base plans") }
        for b in bases where !((1...63).contains(b.count) && startsPlay(b) && b.unicodeScalars.allSatisfy({ isLowerAlnum($0) || $0 == "-" })) {
            throw invalid("playStore.basePlanIds", "each base plan id must start with a-z or 0-9 and hold a-z, 0-9 and - (at most 63)")
        }
        guard Set(bases).count == bases.count else { throw invalid("playStore.basePlanIds", "playStore.basePlanIds has duplicates") }
        return PlayStorePlan(productId: id, basePlanIds: bases)
    }

    /// A Stripe price id: `price_` and letters, digits and `_` (the migration's CHECK too).
    static func checkStripe(_ input: PlanInput.Stripe) throws -> StripePlan {
        guard let id = input.priceId else { throw invalid("stripe.priceId", "stripe.priceId is required") }
        guard id.hasPrefix("price_"), (7...206).contains(id.utf8.count),
            id.unicodeScalars.dropFirst(6).allSatisfy({ isLowerAlnum($0) || ("A"..."Z").contains($0) || $0 == "_" })
        else {
            throw invalid("stripe.priceId", "stripe.priceId must be a Stripe recurring price's id, such as price_1PqR…")
        }
        return StripePlan(priceId: id)
    }

    static func definition(_ input: PlanInput) throws -> PlanDefinition {
        PlanDefinition(productId: try checkProductId(input.productId), name: try checkName(input.name),
                       appStore: try input.appStore.map(checkAppStore), playStore: try input.playStore.map(checkPlayStore),
                       stripe: try input.stripe.map(checkStripe))
    }

    /// The plan after a patch: fields sent replace, fields named in `removing` go (a store side
    /// sent as null). Only `appStore` and `playStore` can be removed.
    static func patched(_ d: PlanDefinition, _ p: Plans.Patch) throws -> PlanDefinition {
        var d = d
        let removing = Set(p.removing ?? [])
        for field in removing where field != "appStore" && field != "playStore" && field != "stripe" {
            throw invalid(field, "\(field.prefix(40)) can't be removed")
        }
        if let name = p.name { d.name = try checkName(name) }
        if removing.contains("appStore") { d.appStore = nil } else if let a = p.appStore { d.appStore = try checkAppStore(a) }
        if removing.contains("playStore") { d.playStore = nil } else if let g = p.playStore { d.playStore = try checkPlayStore(g) }
        if removing.contains("stripe") { d.stripe = nil } else if let s = p.stripe { d.stripe = try checkStripe(s) }
        return d
    }

    private static func isIdCharacter(_ c: Unicode.Scalar) -> Bool {
        ("A"..."Z").contains(c) || ("a"..."z").contains(c) || ("0"..."9").contains(c) || c == "." || c == "_" || c == "-"
    }
    private static func isLowerAlnum(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("0"..."9").contains(c) }
    private static func startsPlay(_ s: String) -> Bool { s.unicodeScalars.first.map(isLowerAlnum) ?? false }
}
