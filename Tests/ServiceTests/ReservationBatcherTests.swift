import Foundation
import Synchronization
import Testing
@testable import CouponsService
@testable import Core
import Database

/// What each request of a reservation batch is answered when the batch fails as a whole
/// (`ReservationBatcher.commit`), driven by a commit that fails on demand: a request alone gets
/// its error, a lost database fails them all at once, and anything else is split until the
/// request at fault stands alone while its neighbours commit.
@Suite struct ReservationBatcherTests {
    struct Choked: Error, Equatable { let on: Int }

    /// Commits the batches it is given unless one holds a request of `poison` (then the whole
    /// batch fails, as a rolled-back transaction does), and records every attempt.
    final class Commits: Sendable {
        let poison: Set<Int>
        private let attempts = Mutex<[[Int]]>([])
        init(poison: Set<Int> = []) { self.poison = poison }

        var tried: [[Int]] { attempts.withLock { $0 } }
        var committed: [Int] { tried.filter { Set($0).isDisjoint(with: poison) }.flatMap { $0 } }

        func attempt(_ batch: [Int]) throws -> [Result<Int, any Error>] {
            attempts.withLock { $0.append(batch) }
            if let bad = batch.first(where: poison.contains) { throw Choked(on: bad) }
            return batch.map { $0 % 10 == 9 ? .failure(ServiceError(.invalid, "item \($0)")) : .success($0 * 2) }
        }
    }

    @Test func aBatchThatCommitsIsAnsweredAsItsCommitSaysInOneTransaction() async throws {
        let commits = Commits()
        let results = await ReservationBatcher.commit(Array(0..<10)) { try commits.attempt($0) }
        #expect(commits.tried == [Array(0..<10)])
        #expect(try results.prefix(9).map { try $0.get() } == (0..<9).map { $0 * 2 })
        #expect(throws: ServiceError(.invalid, "item 9")) { try results[9].get() }
    }

    @Test func aBatchOfOneThatFailsIsAnsweredItsErrorAfterOneAttempt() async throws {
        let commits = Commits(poison: [7])
        let results = await ReservationBatcher.commit([7]) { try commits.attempt($0) }
        #expect(commits.tried == [[7]])
        #expect(results.count == 1)
        #expect(throws: Choked(on: 7)) { try results[0].get() }
    }

    /// One bad request of sixteen: it alone is answered its error, the fifteen others commit once
    /// each, in their places, and it takes 2·log2(16) failed halves, not one transaction per request.
    @Test func theRequestAtFaultIsSplitOffAndItsNeighboursCommit() async throws {
        let commits = Commits(poison: [5])
        let results = await ReservationBatcher.commit(Array(0..<16)) { try commits.attempt($0) }
        #expect(results.count == 16)
        for (i, result) in results.enumerated() {
            if i == 5 {
                #expect(throws: Choked(on: 5)) { try result.get() }
            } else if i % 10 == 9 {
                #expect(throws: ServiceError(.invalid, "item \(i)")) { try result.get() }
            } else {
                #expect(try result.get() == i * 2, "request \(i)")
            }
        }
        #expect(commits.committed.sorted() == Array(0..<16).filter { $0 != 5 }, "each other request committed once")
        #expect(commits.tried.filter { $0.contains(5) } == [Array(0..<16), Array(0..<8), Array(4..<8), [4, 5], [5]])
        #expect(commits.tried.count == 9, "\(commits.tried)")
    }

    @Test func twoBadRequestsAreEachAnsweredTheirOwnError() async throws {
        let commits = Commits(poison: [1, 6])
        let results = await ReservationBatcher.commit(Array(0..<8)) { try commits.attempt($0) }
        #expect(throws: Choked(on: 1)) { try results[1].get() }
        #expect(throws: Choked(on: 6)) { try results[6].get() }
        #expect(commits.committed.sorted() == [0, 2, 3, 4, 5, 7])
        #expect(try [0, 2, 3, 4, 5, 7].map { try results[$0].get() } == [0, 4, 6, 8, 10, 14])
    }

    /// A database that can't be reached is no request's fault: every request is answered that
    /// error at once, and the batch is not split into more failing connections.
    @Test func aLostDatabaseAnswersEveryRequestWithoutSplitting() async throws {
        for lost in [PGError(kind: .connection, message: "server closed the connection unexpectedly"),
                     PGError(kind: .poolClosed, message: "database pool closed")] {
            let tried = Mutex(0)
            let results = await ReservationBatcher.commit(Array(0..<8)) { (_: [Int]) -> [Result<Int, any Error>] in
                tried.withLock { $0 += 1 }
                throw lost
            }
            #expect(tried.withLock { $0 } == 1)
            #expect(results.count == 8)
            for result in results {
                #expect(throws: PGError.self) { try result.get() }
                #expect(result.failure.map(ServiceError.carrying) == .databaseUnavailable)
            }
        }
    }
}

private extension Result {
    var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
