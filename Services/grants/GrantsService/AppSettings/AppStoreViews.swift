import Core
import Database
import Foundation
import Synchronization

/// The store's view of a holder in an app other than the default one (docs/apps.md): RevenueCat's
/// subscriber in the app's own live project, read and kept as `StoreViews` reads the default
/// app's, and no purchase, URL or entry without one. A Google Play subscription's
/// `managementUrl` is Google's page for that subscription in the app's own package (`sku`,
/// `package`), the package read from the app's live Google Play settings.
final class AppStoreViews: Sendable {
    private let providers: ProviderDirectory
    private let pool: PGPool
    /// One `StoreViews` (and its cache) per app, made again when its RevenueCat key changes.
    private let views = Mutex<[UUID: (key: String, views: StoreViews)]>([:])

    init(providers: ProviderDirectory, pool: PGPool) {
        self.providers = providers
        self.pool = pool
    }

    /// The view, or nil when the app's RevenueCat project could not be read in time.
    func view(_ holder: String, app: UUID, fresh: Bool) async throws -> Grants.StoreView.Response? {
        guard let resolved = await providers.resolve(ProviderDirectory.revenueCatName(app: app, sandbox: false)),
            let client = resolved.provider as? RevenueCat
        else {
            return Grants.StoreView.Response(
                holdsStorePurchase: false, managementUrl: nil, entitlements: [], playSubscriptions: [])
        }
        let views = self.views.withLock { v in
            if let held = v[app], held.key == client.key { return held.views }
            if v.count > 1_000 { v.removeAll() }  // bounded: an app dropped costs a new cache, not memory
            let made = StoreViews(revenueCat: client)
            v[app] = (client.key, made)
            return made
        }
        guard var view = await views.view(holder, fresh: fresh) else { return nil }
        // RevenueCat's URL names the store of the latest subscription: Google Play's is made the
        // page of the app's own package; another store's is kept.
        guard let product = view.playSubscriptions?.first,
            view.managementUrl.map({ $0.hasPrefix("https://play.google.com/") }) ?? true
        else { return view }
        let package = try await pool.withConnection { c in
            try AppCredentials.list(c, app: app, mode: .live).first { $0.provider == .googlePlay }?.packageName
        }
        guard let package else { return view }
        view.managementUrl = Self.playURL(product: product, package: package)
        return view
    }

    /// Google Play's page for one subscription of one app.
    static func playURL(product: String, package: String) -> String {
        var c = URLComponents()
        c.scheme = "https"
        c.host = "play.google.com"
        c.path = "/store/account/subscriptions"
        c.queryItems = [URLQueryItem(name: "sku", value: product), URLQueryItem(name: "package", value: package)]
        return c.string ?? "https://play.google.com/store/account/subscriptions"
    }
}
