import Foundation
#if canImport(StoreKit) && (os(iOS) || os(macOS) || os(visionOS))
import StoreKit
#endif
#if canImport(UIKit) && os(iOS)
import UIKit
#elseif canImport(AppKit) && os(macOS)
import AppKit
#endif

// The Apple side of the store hand-off: StoreKit's transactions, the system's URL opener and the
// offer-code sheet. Only Apple's SDK compiles this file's conditional parts, so everything here is
// a thin adapter to a protocol (`StoreTransactionSource`, `OfferCodePage`); what RedeemKit decides
// with them lives in code the Linux tests run.

/// The transactions `start()` listens to by default: StoreKit's on Apple platforms, none elsewhere.
public func defaultStoreTransactions() -> (any StoreTransactionSource)? {
    #if canImport(StoreKit) && (os(iOS) || os(macOS) || os(visionOS))
    AppStoreTransactions()
    #else
    nil
    #endif
}

/// The offer-code page `presentOfferCode` opens by default: the system's on iOS and macOS, none
/// elsewhere.
public func defaultOfferCodePage() -> (any OfferCodePage)? {
    #if canImport(StoreKit) && ((canImport(UIKit) && os(iOS)) || (canImport(AppKit) && os(macOS)))
    SystemOfferCodePage()
    #else
    nil
    #endif
}

#if canImport(StoreKit) && (os(iOS) || os(macOS) || os(visionOS))
/// StoreKit's verified transactions: those left unfinished (`Transaction.unfinished`: bought while
/// the app was away or killed), then each new one (`Transaction.updates`), each once. Unverified
/// ones are skipped: Redeem would refuse their signature anyway.
public struct AppStoreTransactions: StoreTransactionSource {
    /// The App Store's transactions.
    public init() {}

    /// The transactions, unfinished first.
    public func transactions() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                var seen = Set<UInt64>()
                for await result in Transaction.unfinished {
                    if case .verified(let t) = result, seen.insert(t.id).inserted {
                        continuation.yield(StoreTransaction(t, signed: result.jwsRepresentation))
                    }
                }
                for await result in Transaction.updates {
                    if case .verified(let t) = result, seen.insert(t.id).inserted {
                        continuation.yield(StoreTransaction(t, signed: result.jwsRepresentation))
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

extension StoreTransaction {
    /// A StoreKit transaction, with its signed form.
    init(_ t: Transaction, signed: String) {
        let offerType: OfferType
        if let type = t.offerType {
            if type == .code {
                offerType = .code
            } else if type == .promotional {
                offerType = .promotional
            } else if type == .introductory {
                offerType = .introductory
            } else {
                offerType = .other
            }
        } else {
            offerType = .none
        }
        self.init(
            id: String(t.id), productId: t.productID, offerType: offerType, appAccountToken: t.appAccountToken,
            signedTransaction: signed, finish: { await t.finish() })
    }
}

extension RedeemClient {
    /// The purchase options that name the account in Apple's signed purchase:
    /// `.appAccountToken` of the redemption (redeem answers it in `appStore.appAccountToken`).
    /// Pass them wherever StoreKit takes purchase options, so the App Store's notification finds
    /// the reservation even when the app never posts.
    public nonisolated func purchaseOptions(for redemption: Redemption) -> Set<Product.PurchaseOption> {
        guard let token = redemption.appStore?.appAccountToken else { return [] }
        return [.appAccountToken(token)]
    }

    #if os(iOS) || os(macOS)
    /// Buys `product` in the app for a reserved redemption (a plan the user picks after redeeming),
    /// with the redemption's `appAccountToken`, then posts the signed purchase and finishes it.
    /// Nil when the user cancelled, or the purchase waits for approval (Ask to Buy).
    public func purchase(_ product: Product, for redemption: Redemption) async throws -> Redemption? {
        let result = try await product.purchase(options: purchaseOptions(for: redemption))
        guard case .success(let verification) = result, case .verified(let transaction) = verification else {
            return nil
        }
        let posted = try await completeAppStorePurchase(
            redemptionId: redemption.redemptionId, signedTransaction: verification.jwsRepresentation)
        await transaction.finish()
        return posted
    }
    #endif
}
#endif

#if canImport(StoreKit) && ((canImport(UIKit) && os(iOS)) || (canImport(AppKit) && os(macOS)))
/// The system's offer-code page: the URL opened by the system (the App Store takes it), and on
/// iOS Apple's offer-code sheet in the foreground scene.
public struct SystemOfferCodePage: OfferCodePage {
    /// The system's page.
    public init() {}

    /// Opens `url` with the system.
    public func open(_ url: URL) async -> Bool {
        #if os(iOS)
        await Task { @MainActor in await UIApplication.shared.open(url) }.value
        #else
        await Task { @MainActor in NSWorkspace.shared.open(url) }.value
        #endif
    }

    /// Presents Apple's offer-code sheet (iOS); on macOS there is none to fall back to.
    public func presentSheet() async throws {
        #if os(iOS)
        try await Task { @MainActor in
            let scenes = UIApplication.shared.connectedScenes.compactMap { $0 as? UIWindowScene }
            guard let scene = scenes.first(where: { $0.activationState == .foregroundActive }) ?? scenes.first else {
                throw RedeemError(
                    kind: .unsupported, code: .invalidState, message: "no window scene for the offer-code sheet")
            }
            try await AppStore.presentOfferCodeRedeemSheet(in: scene)
        }.value
        #else
        throw RedeemError(
            kind: .unsupported, code: .invalidState, message: "macOS has no offer-code sheet to fall back to")
        #endif
    }
}
#endif
