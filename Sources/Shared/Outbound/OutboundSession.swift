import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// A session for an outside HTTPS API (RevenueCat, the App Store and Play APIs, Sign in with
    /// Apple, CloudKit): FoundationNetworking, which runs on the same libcurl as the rest of this
    /// layer. No cookies, cache or credentials kept between calls, each request bounded by
    /// `timeout`, at most `connectionsPerHost` at once.
    ///
    /// Never cancel a Swift task that waits in this session's `data(for:)`: FoundationNetworking
    /// deadlocks when the cancellation meets the request's own failure (`StoreViews.within`).
    public static func outbound(timeout: TimeInterval, connectionsPerHost: Int = 8) -> URLSession {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.httpMaximumConnectionsPerHost = connectionsPerHost
        return URLSession(configuration: config)
    }
}
