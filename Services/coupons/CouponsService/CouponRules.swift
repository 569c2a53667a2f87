import Core
import Foundation

/// A coupon's definition once every field has passed the rules of docs/api.md.
struct CouponDefinition: Sendable {
    var code: String
    var kind: CouponKind
    var percentOff: Int?
    var amountOff: Decimal?
    var currency: String?
    var duration: CouponDuration
    var periodCount: Int?
    var entitlementId: String?
    var productIds: [String]
    var platforms: [Platform]
    var startsAt: Date?
    var expiresAt: Date?
    var maxRedemptions: Int?
    var newCustomersOnly: Bool
    /// Whether a free period Redeem grants may be redeemed inside an iOS app (`webOnly` otherwise).
    var allowInApp = false
    /// Whether the coupon has App Store offers (`store_offers` rows): decided when it is made
    /// (`needsOffers(in: .appStore)`) and stored, so validate and redeem read offers only for these.
    var hasStoreOffers = false
    /// Whether the coupon has Google Play offers, one per base plan of each plan (`has_play_offers`).
    var hasPlayOffers = false
    /// Whether the coupon is a Stripe coupon with a promotion code, for the web
    /// (`has_stripe_offers`, docs/stripe.md).
    var hasStripeOffers = false
    /// Whether unique codes were made for the coupon (`has_unique_codes`): then end users redeem
    /// it only with one of them, and its own code is `notFound` to them.
    var hasUniqueCodes = false
    /// What operators call the coupon (`checkName`).
    var name: String? = nil
    /// The operator's own key-value pairs (`checkMetadata`).
    var metadata: [String: String] = [:]
    /// Whether any store has offers of the coupon: a full cap, a deactivation or the expiry
    /// switches them off.
    var hasAnyStoreOffers: Bool { hasStoreOffers || hasPlayOffers || hasStripeOffers }

    var isDiscount: Bool { kind.isDiscount }
    /// Discounts that cover iOS go through App Store offer codes, which have limits; so does a
    /// free period that became an App Store offer.
    var hasStoreLimits: Bool { (isDiscount && sellsOn(.appStore)) || hasStoreOffers }

    /// A coupon becomes App Store offers, one per plan, when it covers iOS while the App Store is
    /// connected and the store applies it: a discount, or a free period with plans (`FREE_TRIAL`
    /// at Apple). A free period without plans stays Redeem's own grant.
    /// The same for Google Play, one offer per base plan of each plan (`needsOffers(in: .playStore)`).
    func needsOffers(in store: Store, connected: Bool) -> Bool {
        connected && sellsOn(store) && (isDiscount || (kind == .freePeriod && !productIds.isEmpty))
    }

    /// Whether a redemption on `platform` must be made on the web: a free period Redeem grants (no
    /// App Store offer) asked for inside an iOS app, unless the operator allowed it. App Review
    /// (guideline 3.1.1) lets an iOS app unlock features only through in-app purchase, and offer
    /// codes are the App Store's own; a free period that is neither is redeemed on the redeem page,
    /// and its entitlement then reaches the app through RevenueCat.
    func isWebOnly(on platform: Platform?) -> Bool {
        platform?.store == .appStore && kind == .freePeriod && !hasStoreOffers && !allowInApp
    }

    /// Whether a redemption on `platform` goes through the App Store (reserved, then completed by
    /// a verified purchase) rather than through Redeem's own grant or a hand confirmation.
    func goesThroughAppStore(_ platform: Platform?) -> Bool { hasStoreOffers && platform?.store == .appStore }
    /// The same through Google Play, on Android for a coupon with Play offers.
    func goesThroughPlay(_ platform: Platform?) -> Bool { hasPlayOffers && platform?.store == .playStore }
    /// The store a redemption on `platform` goes through, if any.
    func store(through platform: Platform?) -> Store? {
        goesThroughAppStore(platform) ? .appStore : goesThroughPlay(platform) ? .playStore : nil
    }
    /// Whether the coupon covers a platform that `store` sells on.
    func sellsOn(_ store: Store) -> Bool { platforms.contains { $0.store == store } }

    /// What its store offers give.
    var offerTerms: StoreOfferTerms {
        StoreOfferTerms(
            kind: kind, percentOff: percentOff,
            amountOff: amountOff.map { Money(amount: MoneyText.format($0), currency: currency ?? "") },
            duration: duration, periodCount: periodCount ?? 1)
    }
}

/// The rules for coupon fields, each violation a 422 naming its field.
enum CouponRules {
    static let units = ["day", "week", "month", "year"]

    // App Store offer-code limits, which grants checks too (`AppStoreLimits`).
    static let storeMaxRedemptions = AppStoreLimits.maxRedemptions
    static let storeMaxMonthsAhead = AppStoreLimits.maxMonthsAhead
    static let storeMaxActivePerProduct = AppStoreLimits.activeOffersPerSubscription

    static func invalid(_ field: String, _ message: String) -> ServiceError {
        ServiceError(.invalid, message, field: field)
    }
    static func storeLimit(_ field: String, _ message: String) -> ServiceError {
        ServiceError(.storeLimit, message, field: field)
    }

    /// A coupon's name: 1 to 40 characters, no control characters.
    static func checkName(_ name: String) throws {
        let control = name.unicodeScalars.contains { $0.properties.generalCategory == .control }
        guard (1...CouponMetadata.maxNameLength).contains(name.count), !control else {
            throw invalid(
                "name", "name must be 1 to \(CouponMetadata.maxNameLength) characters without control characters")
        }
    }

    /// Metadata as Stripe takes it: up to 50 keys, each key 1 to 40 characters without `[` or `]`,
    /// each value up to 500 characters. A key whose value is empty is dropped (on a change: removed).
    static func checkMetadata(_ metadata: [String: String]) throws -> [String: String] {
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            let bracket = key.contains { $0 == "[" || $0 == "]" }
            guard (1...CouponMetadata.maxKeyLength).contains(key.count), !bracket else {
                throw invalid(
                    "metadata", "metadata keys must be 1 to \(CouponMetadata.maxKeyLength) characters without [ or ]")
            }
            guard value.count <= CouponMetadata.maxValueLength else {
                throw invalid(
                    "metadata.\(key)", "metadata values must be at most \(CouponMetadata.maxValueLength) characters")
            }
        }
        let kept = metadata.filter { !$0.value.isEmpty }
        guard kept.count <= CouponMetadata.maxKeys else {
            throw invalid("metadata", "metadata holds at most \(CouponMetadata.maxKeys) keys")
        }
        return kept
    }

    /// A change of metadata: `changes` merged into `current`, an empty value removing its key.
    static func merged(_ current: [String: String], _ changes: [String: String]) throws -> [String: String] {
        _ = try checkMetadata(changes)
        return try checkMetadata(current.merging(changes) { $1 })
    }

    /// A cap is a whole number from 1 to `Coupons.largestCap`, on create and on change alike.
    static func checkCap(_ max: Int) throws {
        guard (1...Coupons.largestCap).contains(max) else {
            throw invalid("maxRedemptions", "maxRedemptions must be from 1 to \(Coupons.largestCap)")
        }
    }

    /// Codes are matched without case (and surrounding white space) and stored upper-case.
    static func normalizeCode(_ code: String) -> String { Coupons.normalizeCode(code) }

    static func checkCode(_ code: String?) throws -> String {
        guard let code else { throw invalid("code", "code is required") }
        let upper = normalizeCode(code)
        guard (3...64).contains(upper.count),
            upper.unicodeScalars.allSatisfy({
                ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
            })
        else {
            throw invalid("code", "code must be 3 to 64 of A-Z, 0-9, - and _")
        }
        // The shape of unique codes is theirs, so that a typing error in one is caught unlooked-up.
        guard !UniqueCode.looksUnique(upper) else {
            throw invalid("code", "code must not look like a unique code ([PREFIX-]XXXX-XXXX-XXXX-XXXX)")
        }
        return upper
    }

    static func definition(_ input: CouponInput, defaultEntitlement: String, now: Date) throws -> CouponDefinition {
        let code = try checkCode(input.code)
        guard let kindText = input.kind else { throw invalid("kind", "kind is required") }
        guard let kind = CouponKind(rawValue: kindText) else {
            throw invalid("kind", "kind must be one of \(CouponKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let discount = kind.isDiscount

        var percent: Int?
        if kind == .percentOff {
            guard let p = input.percentOff else {
                throw invalid("percentOff", "percentOff is required for percentOff coupons")
            }
            guard (1...100).contains(p) else {
                throw invalid("percentOff", "percentOff must be a whole number from 1 to 100")
            }
            percent = p
        } else if input.percentOff != nil {
            throw invalid("percentOff", "percentOff is only for percentOff coupons")
        }

        var amount: Decimal?, currency: String?
        if kind == .amountOff {
            guard let money = input.amountOff else {
                throw invalid("amountOff", "amountOff is required for amountOff coupons")
            }
            (amount, currency) = try checkMoney(money, field: "amountOff")
        } else if input.amountOff != nil {
            throw invalid("amountOff", "amountOff is only for amountOff coupons")
        }

        guard let duration = input.duration else { throw invalid("duration", "duration is required") }
        guard units.contains(duration.unit) else {
            throw invalid("duration.unit", "duration.unit must be day, week, month or year")
        }
        guard (1...1000).contains(duration.count) else {
            throw invalid("duration.count", "duration.count must be from 1 to 1000")
        }

        var periodCount: Int?
        if discount {
            guard let pc = input.periodCount else {
                throw invalid("periodCount", "periodCount is required for discounts")
            }
            guard (1...1000).contains(pc) else { throw invalid("periodCount", "periodCount must be at least 1") }
            periodCount = pc
        } else if input.periodCount != nil {
            throw invalid("periodCount", "periodCount is only for discounts")
        }

        var entitlement: String?
        if !discount {
            let e = input.entitlementId ?? defaultEntitlement
            guard (1...200).contains(e.count), !e.contains("/") else {
                throw invalid("entitlementId", "entitlementId must be 1 to 200 characters without /")
            }
            entitlement = e
        } else if input.entitlementId != nil {
            throw invalid("entitlementId", "entitlementId is only for freePeriod coupons")
        }

        let products = input.productIds ?? []
        for p in products where p.isEmpty || p.count > 200 {
            throw invalid("productIds", "product ids must be 1 to 200 characters")
        }
        guard Set(products).count == products.count else { throw invalid("productIds", "productIds has duplicates") }
        if discount && products.isEmpty { throw invalid("productIds", "discounts need at least one product id") }

        let platformList = input.platforms ?? Platform.allCases.map(\.rawValue)
        guard !platformList.isEmpty else {
            throw invalid("platforms", "platforms must name at least one of ios, android, web")
        }
        let platforms = try platformList.map { text in
            guard let p = Platform(rawValue: text) else {
                throw invalid("platforms", "unknown platform \(text.prefix(20)); use \(Platform.listed)")
            }
            return p
        }

        if let expires = input.expiresAt {
            guard expires > now else { throw invalid("expiresAt", "expiresAt is in the past") }
            if let starts = input.startsAt, expires <= starts {
                throw invalid("expiresAt", "expiresAt must be after startsAt")
            }
        }
        if let max = input.maxRedemptions { try checkCap(max) }
        if let name = input.name { try checkName(name) }
        let metadata = try checkMetadata(input.metadata ?? [:])
        if input.allowInApp == true, kind != .freePeriod {
            throw invalid(
                "allowInApp",
                "allowInApp applies to free periods only: a discount in an iOS app is an App Store offer code")
        }
        return CouponDefinition(
            code: code, kind: kind, percentOff: percent, amountOff: amount, currency: currency, duration: duration,
            periodCount: periodCount, entitlementId: entitlement, productIds: products,
            platforms: Set(platforms).sorted { $0.rawValue < $1.rawValue }, startsAt: input.startsAt,
            expiresAt: input.expiresAt,
            maxRedemptions: input.maxRedemptions, newCustomersOnly: input.newCustomersOnly ?? false,
            allowInApp: input.allowInApp ?? false, name: input.name, metadata: metadata)
    }

    /// A new coupon's definition as it will be stored: its fields checked, whether it becomes App
    /// Store or Google Play offers (`needsOffers`), and the store limits that then apply.
    /// A Stripe coupon is made only in a mode whose Stripe key is set (`sk_test_…` for test mode,
    /// `sk_live_…` for live).
    static func checked(
        _ input: CouponInput, defaultEntitlement: String, stores: StoreSettings, now: Date, mode: Mode = .live
    ) throws -> CouponDefinition {
        var d = try definition(input, defaultEntitlement: defaultEntitlement, now: now)
        d.hasStoreOffers = d.needsOffers(in: .appStore, connected: stores.appStoreConnected)
        d.hasPlayOffers = d.needsOffers(in: .playStore, connected: stores.playConnected)
        d.hasStripeOffers = d.needsOffers(in: .stripe, connected: stores.stripeModes.contains(mode))
        try checkStoreLimits(d, now: now)
        return d
    }

    /// A positive amount with at most 2 decimals and an ISO 4217 currency code.
    /// The ISO 4217 codes in use (ICU's list, through Foundation), read at the first check.
    static let currencies = Set(Locale.commonISOCurrencyCodes)

    /// A money amount: a decimal string with at most 2 decimals, positive (or zero when
    /// `allowZero`: a store purchase of a 100 % discount costs nothing), and a current ISO 4217
    /// currency.
    static func checkMoney(_ money: Money, field: String, allowZero: Bool = false) throws -> (Decimal, String) {
        let text = money.amount
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].count <= 10,
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            parts.count == 1 || (1...2).contains(parts[1].count),
            let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
            value > 0 || (allowZero && value == 0)
        else {
            let kind = allowZero ? "a decimal string of at least 0" : "a positive decimal string"
            throw invalid("\(field).amount", "\(field).amount must be \(kind) with at most 2 decimals, like \"4.99\"")
        }
        guard money.currency.count == 3, currencies.contains(money.currency) else {
            throw invalid("\(field).currency", "\(field).currency must be an ISO 4217 code in use, such as EUR")
        }
        return (value, money.currency)
    }

    /// The limits that apply to a coupon (shown as `storeLimits`).
    static func storeLimits(_ d: CouponDefinition) -> [StoreLimit] {
        guard d.hasStoreLimits else { return [] }
        return [
            StoreLimit(store: "appStore", limit: "maxRedemptions", value: storeMaxRedemptions),
            StoreLimit(store: "appStore", limit: "expiresWithinMonths", value: storeMaxMonthsAhead),
            StoreLimit(store: "appStore", limit: "usesPerAccount", value: 1),
            StoreLimit(store: "appStore", limit: "activeCouponsPerProduct", value: storeMaxActivePerProduct)
        ]
    }

    /// Checks the store limits that depend on the coupon alone (the per-product count needs the
    /// database: `CouponStore`).
    static func checkStoreLimits(_ d: CouponDefinition, now: Date) throws {
        guard d.hasStoreLimits else { return }
        try AppStoreLimits.checkCode(maxRedemptions: d.maxRedemptions, expiresAt: d.expiresAt, now: now)
        // An offer's period must be one App Store Connect has (grants checks it again).
        if d.hasStoreOffers, AppStoreOfferDuration(d.duration) == nil {
            throw storeLimit("duration", "App Store offers last 3 days, 1 or 2 weeks, 1, 2, 3 or 6 months, or 1 year")
        }
        // Each further plan's custom code is the code with a suffix (`AppStoreCodes`), within Apple's length.
        let longest = AppStoreCodes.longestCode(plans: d.productIds.count)
        if d.hasStoreOffers, d.code.count > longest {
            throw storeLimit(
                "code",
                "an App Store coupon on \(d.productIds.count) plans has a code of at most \(longest) characters (its plans' codes add -2, -3, …)"
            )
        }
    }
}
