import Bus
import Core
import Foundation
import Synchronization
import Telemetry

/// Another app's Apple id, per mode, for the offer-code page its iOS clients are handed
/// (docs/apps.md, "App Store offers per app"): the `appAppleId` of the app's own `appstore`
/// settings, which grants keeps sealed. It is asked of grants only when a validation or
/// reservation of another app's coupon reaches an App Store hand-off, and kept 30 seconds per app
/// and mode, the staleness every per-app setting accepts. The default app's page is the
/// environment's `REDEEM_APPLE_APP_ID`, and its requests never come here.
final class AppleAppIds: Sendable {
    /// How long an answer of grants is used before it is asked again.
    static let fresh: TimeInterval = 30
    /// How long a known id is still used after grants could not be asked for a newer one.
    static let grace: TimeInterval = 5

    /// A batch reached another app's App Store hand-off without a fresh answer for its mode: it is
    /// dropped (a reservation's transaction rolls back), the id is asked and the batch runs again.
    struct Unknown: Error {
        let app: UUID
        let mode: Mode
    }

    private struct Key: Hashable {
        let app: UUID
        let mode: Mode
    }
    private struct Entry {
        let id: String?
        let until: Date
    }
    private let known = Mutex<[Key: Entry]>([:])
    private let ask: @Sendable (UUID, Mode) async throws -> String?
    private let logger: Logger

    init(logger: Logger, ask: @escaping @Sendable (UUID, Mode) async throws -> String?) {
        self.logger = logger
        self.ask = ask
    }

    /// Asks `grants` for the app's `appstore` settings of the mode.
    convenience init(grants: BusClient, logger: Logger) {
        self.init(logger: logger) { app, mode in
            try await grants.request(AppStores.List(app: app, mode: mode)).data
                .first { $0.provider == .appStore }?.appAppleId
        }
    }

    /// The store settings a batch of `app` runs with: the environment's for the default app;
    /// for another, none of the environment's Apple id, and the app's own of the coupon's mode
    /// read from what is known here (`StoreSettings.forMode`), which throws `Unknown` when it is
    /// not.
    func settings(_ stores: StoreSettings, app: UUID?) -> StoreSettings {
        let app = DefaultApp.of(app)
        guard app != DefaultApp.id else { return stores }
        var own = stores
        own.appleAppId = nil
        own.appleAppIdOfMode = { [self] mode in
            let entry = known.withLock { $0[Key(app: app, mode: mode)] }
            guard let entry, entry.until > Date() else { throw Unknown(app: app, mode: mode) }
            return entry.id
        }
        return own
    }

    /// Runs `batch` with the settings of `app`, and once more after asking grants when it needed
    /// an id that was not known. An id grants can't be asked for is used a few seconds longer
    /// when one is known; otherwise the batch fails with `unavailable`.
    func running<T>(
        app: UUID?, _ stores: StoreSettings, _ batch: (StoreSettings) async throws -> T
    ) async throws -> T {
        let settings = settings(stores, app: app)
        do {
            return try await batch(settings)
        } catch let unknown as Unknown {
            try await learn(unknown.app, unknown.mode)
            return try await batch(settings)
        }
    }

    private func learn(_ app: UUID, _ mode: Mode) async throws {
        let key = Key(app: app, mode: mode)
        do {
            let id = try await ask(app, mode)
            known.withLock { $0[key] = Entry(id: id, until: Date().addingTimeInterval(Self.fresh)) }
        } catch {
            let kept = known.withLock { entries -> Bool in
                guard let entry = entries[key] else { return false }
                entries[key] = Entry(id: entry.id, until: Date().addingTimeInterval(Self.grace))
                return true
            }
            logger.warning(
                "an app's App Store settings could not be read",
                ["app": app.lowercasedString, "mode": mode.rawValue, "error": String(describing: error)])
            guard kept else {
                throw ServiceError(.unavailable, "the app's App Store settings can't be read right now; try again")
            }
        }
    }
}
