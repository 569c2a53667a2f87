import Foundation
import Synchronization
import Testing
@testable import Runtime

@Suite struct CoalescerTests {
    struct Odd: Error {}

    /// A caller's own batch is answered in its order, item by item (a failure stays in its slot),
    /// in batches no bigger than the limit.
    @Test func submittedTogetherAnsweredInOrderWithinTheBatchLimit() async throws {
        let sizes = Mutex<[Int]>([])
        let coalescer = Coalescer<Int, Int>(maxBatch: 4) { inputs in
            sizes.withLock { $0.append(inputs.count) }
            try? await Task.sleep(for: .milliseconds(50))
            return inputs.map { $0 % 2 == 1 && $0 > 10 ? .failure(Odd()) : .success($0 * 2) }
        }
        async let single = coalescer.submit(100)
        let results = await coalescer.submitAll(Array(0..<14))
        #expect(try await single == 200)
        #expect(results.count == 14)
        for (i, r) in results.enumerated() {
            if i % 2 == 1 && i > 10 {
                #expect(throws: Odd.self) { try r.get() }
            } else {
                #expect(try r.get() == i * 2)
            }
        }
        // 15 inputs: the single one alone or with the first four of the others, depending on
        // whether its batch began before they came.
        let batches = sizes.withLock { $0 }
        #expect(batches.reduce(0, +) == 15 && batches.allSatisfy { $0 <= 4 } && [4, 5].contains(batches.count), "\(batches)")
        #expect(await coalescer.submitAll([]).isEmpty)
    }

    /// A key runs as many batches at a time as it has lanes, never more, and every input is answered.
    @Test func aKeyRunsAsManyBatchesAtOnceAsItHasLanes() async throws {
        let running = Mutex((now: 0, most: 0))
        let coalescer = Coalescer<Int, Int>(maxBatch: 3, lanes: 2) { inputs in
            running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
            // The first batches wait (up to 2 s) for a second lane, so a slow machine that
            // submits slowly still shows whether there is one.
            for _ in 0..<200 where running.withLock({ $0.most }) < 2 { try? await Task.sleep(for: .milliseconds(10)) }
            try? await Task.sleep(for: .milliseconds(5))
            running.withLock { $0.now -= 1 }
            return inputs.map { .success($0) }
        }
        let answers = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<40 { group.addTask { try await coalescer.submit(i, key: "one") } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(answers.sorted() == Array(0..<40))
        #expect(running.withLock { $0.most } == 2)
    }
}
