/// Every machine code a service error carries (the API's error shape, docs/api.md), on the bus and in the body
/// of an HTTP error. A closed set: the gateway's switch from code to HTTP status is exhaustive, so a
/// new code does not compile until it has a status.
public enum ErrorCode: String, Codable, Sendable, CaseIterable {
    // Who is asking.
    case notIdentified, invalidToken, invalidCredentials, invalidIdentityToken, forbidden
    /// A one-time sign-in code of the web flow: unknown, already exchanged, or
    /// past its short life.
    case invalidSignInCode, signInCodeUsed, signInCodeExpired
    /// The member has TOTP on: sign-in takes a code from their authenticator app (or a
    /// recovery code) with the password.
    case totpRequired
    /// Data said to be signed by a store (an App Store transaction or notification) whose
    /// signature, chain, bundle, environment or app is not the expected one.
    case invalidSignedData
    /// A CloudKit record name sent without a web auth token that proves it is the sender's.
    case recordNameUnproven
    /// A change an account with an unproven email makes only right after its password was given
    /// (linking Apple or a record name): sign in again.
    case reauthenticationRequired
    /// The email must be proven first (accepting a member invitation with an existing account).
    case emailUnverified
    // What was asked for.
    case notFound, routeNotFound
    // What stands in the way.
    case emailInUse, recordNameInUse, codeInUse, productInUse, transactionInUse, invalidState
    /// The Apple user of a link already signs in to another account.
    case appleIdInUse
    // What was sent.
    case invalid, weakPassword, storeLimit
    /// The web flow's `return` is not on the allow-list; its callback's `state` does not match
    /// the browser's cookie (forged, or the cookie is gone).
    case returnNotAllowed, stateMismatch
    case rateLimited
    /// A one-time download (the CSV of new unique codes) that was taken already, or expired.
    case downloadGone
    /// Mail is not set up on this server (no `REDEEM_SMTP_URL`): email verification and password
    /// reset are not offered.
    case mailNotConfigured
    /// CloudKit is not set up on this server (no `REDEEM_CLOUDKIT_CONTAINER`), so record names,
    /// which only CloudKit can prove, are refused.
    case cloudKitNotConfigured
    // The bus and the services themselves.
    case timeout, unavailable
    case malformedMessage, unknownMessageType, unsupportedVersion, `internal`

    /// A code this version does not know (from a newer service) reads as `internal`: a 500, never a
    /// guess at a client error.
    public init(from decoder: any Decoder) throws {
        self = ErrorCode(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .internal
    }
}
