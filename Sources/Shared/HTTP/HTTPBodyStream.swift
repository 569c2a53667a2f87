import Foundation
import Synchronization

/// A response body produced while it is sent (e.g. a CSV export), with bounded memory: the
/// producer's `write` waits while more than `limit` bytes are buffered and not yet sent.
/// libmicrohttpd's thread pulls with `read`, which waits briefly when the producer is behind.
public final class HTTPBodyStream: Sendable {
    private struct State {
        var chunks: [Data] = []
        var offset = 0
        var buffered = 0
        var finished = false
        var cancelled = false
        var waitingProducer: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)
    public let limit: Int

    public init(limit: Int = 256 * 1024) { self.limit = limit }

    /// Appends bytes; answers false once the client has gone away (stop producing then).
    @discardableResult
    public func write(_ data: Data) async -> Bool {
        guard !data.isEmpty else { return true }
        let mustWait = state.withLock { s -> Bool? in
            if s.cancelled { return nil }
            s.chunks.append(data)
            s.buffered += data.count
            return s.buffered > limit
        }
        guard let mustWait else { return false }
        available.signal()
        if mustWait {
            await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.cancelled || s.buffered <= limit { return true }
                    s.waitingProducer = cont
                    return false
                }
                if resumeNow { cont.resume() }
            }
        }
        return state.withLock { !$0.cancelled }
    }

    /// Everything written and not yet read, taken out: for a caller inside the process that wants
    /// a streamed body whole (the MCP server's CSV export), with a stream whose `limit` never
    /// makes the producer wait.
    public func drain() -> Data {
        state.withLock { s in
            var out = Data()
            for chunk in s.chunks { out.append(chunk) }
            if s.offset > 0, !out.isEmpty { out.removeFirst(min(s.offset, out.count)) }
            s.chunks = []
            s.offset = 0
            s.buffered = 0
            return out
        }
    }

    public func finish() {
        state.withLock { $0.finished = true }
        available.signal()
    }

    /// The connection closed: wake and stop the producer.
    func cancel() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.cancelled = true
            defer { s.waitingProducer = nil }
            return s.waitingProducer
        }
        waiter?.resume()
    }

    /// Copies up to `max` bytes into `buffer`; 0 never (it waits), -1 at the end, -2 on a stall.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> Int {
        while true {
            var waiter: CheckedContinuation<Void, Never>?
            let n = state.withLock { s -> Int? in
                while let first = s.chunks.first, s.offset >= first.count {
                    s.chunks.removeFirst()
                    s.offset = 0
                }
                if let first = s.chunks.first {
                    let count = min(max, first.count - s.offset)
                    first.withUnsafeBytes { raw in
                        buffer.copyMemory(from: raw.baseAddress!.advanced(by: s.offset), byteCount: count)
                    }
                    s.offset += count
                    s.buffered -= count
                    if s.buffered <= limit, let w = s.waitingProducer {
                        waiter = w
                        s.waitingProducer = nil
                    }
                    return count
                }
                return s.finished ? -1 : nil
            }
            waiter?.resume()
            if let n { return n }
            if available.wait(timeout: .now() + 60) == .timedOut { return -2 }
        }
    }
}
