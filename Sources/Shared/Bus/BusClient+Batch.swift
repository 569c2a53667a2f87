import Core
import Foundation
import Synchronization

extension BusClient {
    /// Sends `items` as one `B` and answers each item's result. A service that does not know `B`
    /// (an earlier version) answers `unknownMessageType`: the items then go one by one, and so do
    /// later batches for a minute before `B` is tried again, so the upgrade order doesn't matter.
    public func requestBatch<B: BusBatch>(_ items: [B.Item], as batch: B.Type, timeout: Duration? = nil) async -> [Result<B.Item.Response, any Error>] {
        if batches.sendsBatches(of: B.type) {
            do {
                let answers = B.answers(in: try await request(B(items: items), timeout: timeout))
                guard answers.count == items.count else { throw ServiceError.malformed("\(B.type) answered \(answers.count) of \(items.count) items") }
                return answers
            } catch let e as ServiceError where e.code == ServiceError.unknownType(B.type).code {
                batches.refused(B.type)
            } catch {
                return items.map { _ in .failure(error) }
            }
        }
        return await withTaskGroup(of: (Int, Result<B.Item.Response, any Error>).self) { group in
            for (i, item) in items.enumerated() {
                group.addTask {
                    do { return (i, .success(try await self.request(item, timeout: timeout))) } catch { return (i, .failure(error)) }
                }
            }
            var results = [Result<B.Item.Response, any Error>](repeating: .failure(ServiceError.internal), count: items.count)
            for await (i, r) in group { results[i] = r }
            return results
        }
    }
}

/// The batch types a service refused, and until when they are not sent again.
final class BatchSupport: Sendable {
    private let refusedUntil = Mutex<[String: ContinuousClock.Instant]>([:])
    static let retryAfter = Duration.seconds(60)

    func sendsBatches(of type: String) -> Bool {
        refusedUntil.withLock { $0[type].map { ContinuousClock.now >= $0 } ?? true }
    }

    func refused(_ type: String) {
        refusedUntil.withLock { $0[type] = ContinuousClock.now + Self.retryAfter }
    }
}
