import Core
import Foundation

/// One coupon's offer for one plan, as App Store Connect is to make it (docs/stores.md): the
/// facts of a `grants.storeProvision` command.
struct AppStoreOfferSpec: Sendable, Equatable {
    var subscriptionId: String
    /// Unique and stable for (coupon, store, plan): a restart finds the offer it made by this name.
    var offerName: String
    /// The coupon's code, the custom code.
    var code: String
    var kind: CouponKind
    var percentOff: Int?
    var amountOff: Money?
    var duration: CouponDuration
    var periodCount: Int
    var newCustomersOnly: Bool
    var maxRedemptions: Int?
    var expiresAt: Date?

    /// `FREE_TRIAL` when the customer pays nothing for the offer's time (a free period, or 100 %
    /// off), else `PAY_AS_YOU_GO`.
    var mode: AppStoreOfferRequest.Mode {
        kind == .freePeriod || percentOff == 100 ? .freeTrial : .payAsYouGo
    }

    /// What is taken off a `PAY_AS_YOU_GO` price.
    func discount() throws(OfferPricing.Problem) -> OfferPricing.Discount {
        switch kind {
        case .percentOff:
            guard let p = percentOff, (1...99).contains(p) else { throw .init(message: "percentOff must be from 1 to 99 for a paid offer") }
            return .percent(p)
        case .amountOff:
            guard let money = amountOff, let amount = OfferPricing.decimal(money.amount), amount > 0 else {
                throw .init(message: "amountOff must be a positive amount")
            }
            return .amount(amount, currency: money.currency)
        case .freePeriod:
            throw .init(message: "a free period has no price")
        }
    }
}

/// The ids provisioning has got from Apple so far. The worker stores them after each call, so a
/// restart goes on from there; an id got but not stored is found again by name.
struct AppStoreOfferProgress: Sendable, Equatable, Codable {
    var offerId: String?
    var customCodeId: String?
    var codeCreatedAt: Date?
    /// A switch's PATCH of the code, and of the offer, is done.
    var codeSwitched = false
    var offerSwitched = false
}

/// What a provisioning or switching off came to.
enum AppStoreTaskOutcome: Sendable, Equatable {
    /// Done: the offer and its code exist (provision), or both are off (switch off).
    case done(AppStoreOfferProgress)
    /// Not done yet, nothing refused: try again (after `after` seconds when Apple said so).
    case retryLater(after: TimeInterval?, reason: String, AppStoreOfferProgress)
    /// Refused, by Redeem's check of Apple's limits before any call or by Apple (its message).
    case failed(String, AppStoreOfferProgress)
}

/// Makes a coupon's offer and custom code for one plan at App Store Connect, and switches them
/// off, one call at a time (docs/stores.md, "Flow"):
///
/// 1. Apple's limits, checked before any call: the code's cap and expiry (`AppStoreLimits`), the
///    offer's duration, and at most 10 active offers per subscription among Redeem's own.
/// 2. The offer: looked for by name among the subscription's offers (a restart after Apple made
///    it), else made after checking Apple's own count of active offers, with its prices (for
///    `PAY_AS_YOU_GO`, from the current prices and the price points).
/// 3. The custom code: looked for among the offer's codes, else made.
///
/// `record` hears the progress after each id is got, before the next call; if it throws, the
/// run stops there (`retryLater`) and the next run looks for what was made. So a crash between
/// two calls never makes anything twice.
struct OfferProvisioner: Sendable {
    let client: AppStoreConnectClient
    typealias Record = @Sendable (AppStoreOfferProgress) async throws -> Void

    /// What Apple's custom code is made with: Apple's own limits, not the coupon's. Apple can't
    /// change a code's `numberOfCodes` or `expirationDate` once it is made, and Redeem enforces the
    /// coupon's smaller cap and its expiry itself, switching the code off when either is reached.
    /// So a coupon's cap can be raised (up to Apple's 25,000) and its expiry moved (up to 6 months
    /// after the coupon was made, which coupons checks; the code is made after the coupon) without
    /// the code refusing customers Redeem lets in.
    static func codeTerms(madeAt now: Date) -> (numberOfCodes: Int, expiresAt: Date) {
        (AppStoreLimits.maxRedemptions, AppStoreLimits.latestExpiry(madeAt: now))
    }

    /// What Apple would refuse of the offer itself, checked before any call (nil: nothing): the
    /// code's cap and expiry (`AppStoreLimits`), an expiry that has passed, the offer's duration.
    /// The simulated App Store of test mode (`SimulatedStore`) refuses the same.
    static func refusal(_ spec: AppStoreOfferSpec, now: Date) -> String? {
        do {
            try AppStoreLimits.checkCode(maxRedemptions: spec.maxRedemptions, expiresAt: spec.expiresAt, now: now)
        } catch {
            return error.message
        }
        // There once the limits pass.
        guard let expires = spec.expiresAt else { return "no expiry" }
        guard expires > now else { return "the coupon expired before its App Store offer was made" }
        guard AppStoreOfferDuration(spec.duration) != nil else {
            return "App Store offers last 3 days, 1 or 2 weeks, 1, 2, 3 or 6 months, or 1 year"
        }
        return nil
    }

    /// `ownActiveOffers`: Redeem's live offers made and not switched off for this subscription,
    /// other than this one.
    func provision(
        _ spec: AppStoreOfferSpec, from start: AppStoreOfferProgress, ownActiveOffers: Int, record: Record
    ) async -> AppStoreTaskOutcome {
        var progress = start
        let now = client.now()
        if let refusal = Self.refusal(spec, now: now) { return .failed(refusal, progress) }
        guard let duration = AppStoreOfferDuration(spec.duration) else { return .failed("no duration", progress) }
        let limit = AppStoreLimits.activeOffersPerSubscription
        if progress.offerId == nil && ownActiveOffers >= limit {
            return .failed("the App Store allows at most \(limit) active offer codes per subscription, and Redeem has \(ownActiveOffers) "
                           + "for subscription \(spec.subscriptionId)", progress)
        }
        do {
            if progress.offerId == nil {
                let offers = try await client.offers(subscriptionId: spec.subscriptionId)
                if let made = offers.first(where: { $0.name == spec.offerName }) {
                    progress.offerId = made.id
                } else {
                    let active = offers.filter(\.active).count
                    guard active < limit else {
                        return .failed("the App Store allows at most \(limit) active offer codes per subscription, and subscription "
                                       + "\(spec.subscriptionId) has \(active)", progress)
                    }
                    let prices = try await offerPrices(spec)
                    let request = AppStoreOfferRequest(subscriptionId: spec.subscriptionId, name: spec.offerName, newCustomersOnly: spec.newCustomersOnly,
                                                       mode: spec.mode, duration: duration, numberOfPeriods: max(1, spec.periodCount), prices: prices)
                    progress.offerId = try await client.createOffer(request).id
                }
                try await record(progress)
            }
            if progress.customCodeId == nil, let offerId = progress.offerId {
                let code: AppStoreCustomCode
                if let made = try await client.customCodes(offerId: offerId).first(where: { $0.customCode.uppercased() == spec.code.uppercased() }) {
                    code = made
                } else {
                    let terms = Self.codeTerms(madeAt: client.now())
                    code = try await client.createCustomCode(offerId: offerId, code: spec.code, numberOfCodes: terms.numberOfCodes,
                                                             expirationDate: AppStoreConnectClient.day(terms.expiresAt))
                }
                progress.customCodeId = code.id
                progress.codeCreatedAt = code.createdDate ?? client.now()
                try await record(progress)
            }
            return .done(progress)
        } catch let e as AppleCallError {
            return Self.outcome(e, progress)
        } catch let problem as OfferPricing.Problem {
            return .failed(problem.message, progress)
        } catch {
            return .retryLater(after: nil, reason: "progress not recorded: \(error)", progress)
        }
    }

    /// Switches the offer and its custom code off (the code first, so no customer is let in by a
    /// code whose offer is going), or back on (the offer first), with `PATCH active`. Without their
    /// ids, the offer is looked for by name (when `subscriptionId` is known) and the code among its
    /// codes; what cannot be found was never made, and needs nothing.
    func switchTo(active: Bool, subscriptionId: String?, offerName: String, code: String, from start: AppStoreOfferProgress,
                  record: Record) async -> AppStoreTaskOutcome {
        var progress = start
        do {
            if progress.offerId == nil, let subscriptionId {
                progress.offerId = try await client.offers(subscriptionId: subscriptionId).first { $0.name == offerName }?.id
            }
            guard let offerId = progress.offerId else { return .done(progress) }
            if active { try await switchOffer(active, offerId: offerId, &progress, record: record) }
            if !progress.codeSwitched {
                if progress.customCodeId == nil {
                    progress.customCodeId = try await client.customCodes(offerId: offerId).first { $0.customCode.uppercased() == code.uppercased() }?.id
                }
                if let codeId = progress.customCodeId { try await client.setActive(active, customCodeId: codeId) }
                progress.codeSwitched = true
                try await record(progress)
            }
            if !active { try await switchOffer(active, offerId: offerId, &progress, record: record) }
            return .done(progress)
        } catch let e as AppleCallError {
            return Self.outcome(e, progress)
        } catch {
            return .retryLater(after: nil, reason: "progress not recorded: \(error)", progress)
        }
    }

    private func switchOffer(_ active: Bool, offerId: String, _ progress: inout AppStoreOfferProgress, record: Record) async throws {
        guard !progress.offerSwitched else { return }
        try await client.setActive(active, offerId: offerId)
        progress.offerSwitched = true
        try await record(progress)
    }

    /// The prices of a new offer: for a free trial, every territory of the subscription with no
    /// price point; else the price point `OfferPricing` chooses in each. Throws `AppleCallError`,
    /// or `OfferPricing.Problem` when the offer cannot be priced.
    func offerPrices(_ spec: AppStoreOfferSpec) async throws -> [String: String?] {
        let current = try await client.currentPrices(subscriptionId: spec.subscriptionId)
        guard !current.isEmpty else { throw OfferPricing.Problem(message: "subscription \(spec.subscriptionId) has no prices at Apple") }
        if spec.mode == .freeTrial { return Dictionary(uniqueKeysWithValues: current.map { ($0.territory, String?.none) }) }
        let discount = try spec.discount()
        let points = try await client.pricePoints(subscriptionId: spec.subscriptionId, territories: current.map(\.territory))
        return try OfferPricing.choose(current: current, points: points, discount: discount).prices.mapValues { Optional($0) }
    }

    static func outcome(_ e: AppleCallError, _ progress: AppStoreOfferProgress) -> AppStoreTaskOutcome {
        switch e {
        case .retryLater(let after, let reason): .retryLater(after: after, reason: reason, progress)
        case .refused(_, let message): .failed(message, progress)
        }
    }
}
