import Foundation
#if canImport(CloudKit)
import CloudKit
#endif

/// Proves this device's iCloud user to the server. A CloudKit record name is not a secret, so the
/// server takes one only with a CloudKit web auth token of the same user, which it checks with
/// CloudKit Web Services. RedeemKit asks for a new token for every call that sends a record name
/// (CloudKit spends a token on its first use). On Apple platforms use `CloudKitWebAuthTokens`;
/// tests give a fake.
public protocol CloudKitIdentityProvider: Sendable {
    /// A new CloudKit web auth token of the device's iCloud user.
    func webAuthToken() async throws -> String
}

#if canImport(CloudKit)
/// Fetches web auth tokens with `CKFetchWebAuthTokenOperation`, for the container and its API
/// token (made in CloudKit Console; the server is set up with the same container and token).
public struct CloudKitWebAuthTokens: CloudKitIdentityProvider {
    /// The container's identifier (`iCloud.…`); nil: the app's default container.
    public let containerIdentifier: String?
    /// The container's API token for its environment.
    public let apiToken: String

    public init(containerIdentifier: String? = nil, apiToken: String) {
        self.containerIdentifier = containerIdentifier
        self.apiToken = apiToken
    }

    public func webAuthToken() async throws -> String {
        let container = containerIdentifier.map { CKContainer(identifier: $0) } ?? CKContainer.default()
        let apiToken = self.apiToken
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            let operation = CKFetchWebAuthTokenOperation(apiToken: apiToken)
            operation.qualityOfService = .userInitiated
            operation.fetchWebAuthTokenResultBlock = { result in continuation.resume(with: result) }
            container.privateCloudDatabase.add(operation)
        }
    }
}
#endif

extension RedeemClient {
    /// The web auth token to send with `recordName`: none without a record name, or without a
    /// provider (a server that trusts clients, in development). A provider that fails fails the call.
    func webAuthToken(for recordName: String?) async throws -> String? {
        guard recordName != nil, let provider = configuration.cloudKit else { return nil }
        do {
            return try await provider.webAuthToken()
        } catch let error as RedeemError {
            throw error
        } catch {
            throw RedeemError(
                kind: .cloudKit, code: .cloudKitUnavailable,
                message: "CloudKit gave no web auth token: \(error.localizedDescription)")
        }
    }
}
