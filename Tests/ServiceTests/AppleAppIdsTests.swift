import Foundation
import Synchronization
import Telemetry
import Testing

@testable import Core
@testable import CouponsService

/// Another app's Apple id for its offer-code page (`AppleAppIds`, docs/apps.md): the default app's
/// batches run with the environment's id and never ask; another app's ask grants (here a
/// recording stand-in for the bus request) once per app and mode when a batch first needs it,
/// run again with the answer, and reuse it; an id grants can't give fails the batch `unavailable`.
@Suite struct AppleAppIdsTests {
    final class Grants: Sendable {
        let asked = Mutex<[Mode]>([])
        let ids: [Mode: String]
        let fails: Bool
        init(_ ids: [Mode: String], fails: Bool = false) {
            self.ids = ids
            self.fails = fails
        }
        func ask(_ mode: Mode) throws -> String? {
            asked.withLock { $0.append(mode) }
            if fails { throw ServiceError(.unavailable, "grants is away") }
            return ids[mode]
        }
    }

    let environment = StoreSettings(appStoreConnected: true, appleAppId: "6450000001", offerSettle: 1)
    let logger = Logger(service: "coupons-test", minimum: .error)

    func ids(_ grants: Grants) -> AppleAppIds {
        AppleAppIds(logger: logger) { _, mode in try grants.ask(mode) }
    }

    @Test func theDefaultAppsBatchesUseTheEnvironmentsIdAndNeverAsk() async throws {
        let grants = Grants([.live: "6450000002"])
        let appleAppIds = ids(grants)
        for app in [nil, DefaultApp.id] {
            let id = try await appleAppIds.running(app: app, environment) { try $0.forMode(.live).appleAppId }
            #expect(id == "6450000001")
        }
        #expect(grants.asked.withLock { $0 }.isEmpty)
    }

    @Test func anotherAppsBatchAsksOncePerModeAndRunsAgainWithItsOwnId() async throws {
        let grants = Grants([.live: "6450000002", .test: "6450000003"])
        let appleAppIds = ids(grants)
        let app = UUID()
        let runs = Mutex(0)
        func id(_ mode: Mode) async throws -> String? {
            try await appleAppIds.running(app: app, environment) { stores in
                runs.withLock { $0 += 1 }
                return try stores.forMode(mode).appleAppId
            }
        }
        #expect(try await id(.live) == "6450000002")
        #expect(runs.withLock { $0 } == 2, "dropped once for the id, then run again")
        #expect(try await id(.live) == "6450000002")
        #expect(try await id(.test) == "6450000003")
        #expect(grants.asked.withLock { $0 } == [.live, .test], "each mode asked once")
        // A batch that hands off to no store never asks.
        let other = try await appleAppIds.running(app: UUID(), environment) { $0.appleAppId }
        #expect(other == nil, "never the environment's id for another app")
        #expect(grants.asked.withLock { $0 }.count == 2)
    }

    @Test func anIdGrantsCantGiveFailsTheBatchUnavailable() async throws {
        let grants = Grants([:], fails: true)
        let appleAppIds = ids(grants)
        let error = await #expect(throws: ServiceError.self) {
            try await appleAppIds.running(app: UUID(), environment) { try $0.forMode(.live).appleAppId }
        }
        #expect(error?.code == .unavailable)
        // An app without App Store settings: no id, no page, and no error.
        let none = ids(Grants([:]))
        #expect(try await none.running(app: UUID(), environment) { try $0.forMode(.live).appleAppId } == nil)
    }
}
