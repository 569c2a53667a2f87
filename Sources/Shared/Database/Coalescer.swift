import Foundation
import Synchronization

/// Group commit: inputs submitted under one key while a batch for that key is being processed
/// wait and are processed together in the next batch (up to `maxBatch`). Under light load a batch
/// is one input and nothing waits for a timer; under heavy load one transaction serves many.
/// Different keys are processed in parallel.
public final class Coalescer<Input: Sendable, Output: Sendable>: Sendable {
    /// Processes a batch and answers one result per input, in order.
    public typealias Process = @Sendable ([Input]) async -> [Result<Output, any Error>]

    private struct Waiting {
        let input: Input
        let continuation: CheckedContinuation<Output, any Error>
    }

    private let queues = Mutex<[String: [Waiting]]>([:])
    private let process: Process
    public let maxBatch: Int

    public init(maxBatch: Int, process: @escaping Process) {
        self.maxBatch = max(1, maxBatch)
        self.process = process
    }

    public func submit(_ input: Input, key: String = "") async throws -> Output {
        try await withCheckedThrowingContinuation { cont in
            // The first input of an idle key starts its drain; later ones just queue.
            let starts = queues.withLock { q -> Bool in
                if q[key] != nil {
                    q[key]!.append(Waiting(input: input, continuation: cont))
                    return false
                }
                q[key] = [Waiting(input: input, continuation: cont)]
                return true
            }
            if starts { Task { await self.drain(key) } }
        }
    }

    /// Runs batches for one key until its queue is empty; the entry is removed in the same locked
    /// step that finds it empty, so a later input starts a new drain.
    private func drain(_ key: String) async {
        while true {
            let batch = queues.withLock { q -> [Waiting] in
                guard let waiting = q[key], !waiting.isEmpty else {
                    q[key] = nil
                    return []
                }
                let take = Array(waiting.prefix(maxBatch))
                q[key] = Array(waiting.dropFirst(take.count))
                return take
            }
            if batch.isEmpty { return }
            let results = await process(batch.map(\.input))
            for (i, w) in batch.enumerated() {
                w.continuation.resume(with: i < results.count ? results[i] : .failure(CoalescerError.missingResult))
            }
        }
    }
}

enum CoalescerError: Error { case missingResult }
