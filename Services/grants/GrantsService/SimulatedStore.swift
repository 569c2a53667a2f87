import Core
import Cryptography
import Foundation

/// The App Store and Google Play of test mode (docs/stores.md, "Test mode"): a test coupon's store
/// commands are answered here and never reach App Store Connect or the Play Developer API, as
/// Stripe's test mode never reaches a card network. A test key can't publish a real offer code,
/// switch off a real one, or take a custom code a live coupon needs.
///
/// The simulation keeps the live flow: the task is stored, claimed and reported like a live one,
/// so a test offer goes `creating` → `waitingForApple` / `waitingForGoogle` → `ready` on the
/// store's settle clock (from `codeCreatedAt`, the time of the simulated run). What Apple refuses
/// of an offer itself (`OfferProvisioner.refusal`) is refused here too; Apple's count of active
/// offers and custom codes is the live coupons' alone.
enum SimulatedStore {
    /// A provisioning: the ids a store would give, derived from the task (`sim_` and 24 hex
    /// digits, so a simulated id is never taken for a store's, and a repeat gives the same ids).
    static func provision(
        _ command: StoreProvisionCommand, from start: AppStoreOfferProgress, now: Date
    ) -> AppStoreTaskOutcome {
        var progress = start
        if command.store == .appStore, let refusal = OfferProvisioner.refusal(AppStoreOfferSpec(command), now: now) {
            return .failed(refusal, progress)
        }
        if command.store == .playStore {
            guard command.basePlanId != nil else { return .failed("a Google Play offer needs a base plan", progress) }
            if let expires = command.expiresAt, expires <= now {
                return .failed("the coupon expired before its Google Play offer was made", progress)
            }
        }
        progress.offerId = progress.offerId ?? id("offer", command.commandId)
        if command.store == .appStore { progress.customCodeId = progress.customCodeId ?? id("code", command.commandId) }
        progress.codeCreatedAt = progress.codeCreatedAt ?? now
        return .done(progress)
    }

    /// A switch off or back on: done at once, as a store that always agrees.
    static func switchTo(from start: AppStoreOfferProgress) -> AppStoreTaskOutcome {
        var progress = start
        progress.codeSwitched = true
        progress.offerSwitched = true
        return .done(progress)
    }

    /// A simulated id: `sim_` and 24 hex digits of SHA-256(kind, command id).
    static func id(_ kind: String, _ command: UUID) -> String {
        "sim_" + Crypto.sha256(Array("redeem.simulatedStore|\(kind)|\(command.lowercasedString)".utf8)).hex.prefix(24)
    }

    /// Whether an id is one this simulation gave.
    static func isSimulated(_ id: String) -> Bool { id.hasPrefix("sim_") }
}
