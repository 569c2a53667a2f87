import Bus
import Core
import Database
import Foundation

/// An app's store and RevenueCat settings (docs/apps.md): set and removed by its admins, audited
/// without a secret (the entry holds what the API shows).
extension GrantsService {
    func putAppStore(_ req: AppStores.Put, _ context: BusContext) async throws -> StoreSettingsView {
        guard req.app != DefaultApp.id else { throw AppCredentials.defaultAppRefused }
        let checked = try AppCredentials.check(req.provider, mode: req.mode, req.input)
        let view = try await pool.transaction { [keyring] tx in
            let (before, after) = try AppCredentials.put(
                tx, app: req.app, mode: req.mode, provider: req.provider, checked, keyring: keyring)
            try Self.audit(
                tx, req.actor, .appStoresSet, Self.settingsObjectId(req.app, req.provider), before: before,
                after: after,
                context, req.mode, app: req.app)
            return after
        }
        providers.forget(app: req.app)
        return view
    }

    func clearAppStore(_ req: AppStores.Clear, _ context: BusContext) async throws -> Empty {
        try await pool.transaction { tx in
            guard let before = try AppCredentials.clear(tx, app: req.app, mode: req.mode, provider: req.provider) else {
                throw ServiceError(
                    .notFound, "no \(req.provider.rawValue) settings are set for this app in \(req.mode.rawValue) mode")
            }
            try Self.audit(
                tx, req.actor, .appStoresClear, Self.settingsObjectId(req.app, req.provider), before: before,
                after: nil,
                context, req.mode, app: req.app)
        }
        providers.forget(app: req.app)
        return Empty()
    }

    /// The audit log's object id of one provider's settings: `<app id>/<provider>`.
    static func settingsObjectId(_ app: UUID, _ provider: StoreProvider) -> String {
        app.uppercasedString + "/" + provider.rawValue
    }
}
