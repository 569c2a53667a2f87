import Core
import Foundation
import Telemetry

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// A session for an outside HTTPS API (RevenueCat, the App Store and Play APIs, Sign in with
    /// Apple, CloudKit): FoundationNetworking, which runs on the same libcurl as the rest of this
    /// layer. No cookies, cache or credentials kept between calls, each request bounded by
    /// `timeout`, at most `connectionsPerHost` at once.
    ///
    /// Call it with `outboundData(for:)`, never `data(for:)`: FoundationNetworking deadlocks when a
    /// Swift task is cancelled while it waits in `data(for:)` and the request ends at that moment
    /// (the cancel and the completion each wait on the other's lock).
    public static func outbound(timeout: TimeInterval, connectionsPerHost: Int = 8) -> URLSession {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.httpMaximumConnectionsPerHost = connectionsPerHost
        return URLSession(configuration: config)
    }

    /// `data(for:)` that the caller's cancellation does not reach. The request runs in a task of
    /// its own, so cancelling the caller (a worker stopped, a task group ended) never cancels a
    /// URLSession task, which deadlocks FoundationNetworking (`outbound`); a cancelled caller waits
    /// for the request to end, within the session's timeout.
    ///
    /// `dependency` names the API called (`revenuecat`, `app_store`, …): the call is a client span,
    /// whose `traceparent` the request carries, and is counted and timed by outcome (`Tracer.dependency`).
    public func outboundData(for request: URLRequest, dependency: String) async throws -> (Data, URLResponse) {
        let session = UncheckedSession(session: self)
        return try await Tracer.shared.dependency(
            dependency, request.httpMethod ?? "GET",
            outcome: { Tracer.httpOutcome(($0.1 as? HTTPURLResponse)?.statusCode ?? 0) }
        ) {
            var request = request
            if let trace = LogContext.trace { request.setValue(trace.traceparent, forHTTPHeaderField: "traceparent") }
            let traced = request
            return try await Task.detached { try await session.session.data(for: traced) }.value
        }
    }
}

/// FoundationNetworking's `URLSession` is thread-safe, but not declared `Sendable` everywhere.
private struct UncheckedSession: @unchecked Sendable {
    let session: URLSession
}
