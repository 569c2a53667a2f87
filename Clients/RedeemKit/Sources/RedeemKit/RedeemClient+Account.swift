import Foundation

// The account's own chores: proving the email, resetting a forgotten password, finishing a sign-in
// made in a browser, and linking Sign in with Apple (docs/api.md, "Email verification and password
// reset" and "Sign in with Apple on the web and Android").

extension RedeemClient {
    // MARK: - Email verification

    /// Mails a verification code to the signed-in account's email (`POST /v1/me/email/verify`,
    /// 202). The mail carries a code, not a link: the user types or pastes it into the app, which
    /// sends it with `confirmEmail(code:)`. Throws `.invalidState` when the email is verified
    /// already or the account has none, `.mailNotConfigured` on a server without mail.
    public func requestEmailVerification() async throws {
        _ = try await authorized(APIRequest("POST", "/v1/me/email/verify"))
    }

    /// Verifies the email with the code mailed to it (`POST /v1/accounts/email/confirm {token}`,
    /// 204). A wrong, used or expired code throws `.invalidToken`. When someone is signed in, the
    /// stored account is read again, so `account?.emailVerified` is true at once.
    public func confirmEmail(code: String) async throws {
        struct Body: Encodable { var token: String }
        _ = try await transport.send(
            try APIRequest("POST", "/v1/accounts/email/confirm", json: Body(token: code)), token: nil)
        if try currentSession() != nil { _ = try? await me() }
    }

    // MARK: - Password reset

    /// Mails a password reset code to `email` (`POST /v1/sessions/password/reset`, 202). The answer
    /// is the same whether or not an account has that email, so it tells no one which emails have
    /// accounts; no one needs to be signed in.
    public func requestPasswordReset(email: String) async throws {
        struct Body: Encodable { var email: String }
        _ = try await transport.send(
            try APIRequest("POST", "/v1/sessions/password/reset", json: Body(email: email)), token: nil)
    }

    /// Sets a new password with the mailed code (`POST /v1/sessions/password/reset/confirm
    /// {token, password}`) and signs in: the server ends every other session of the account and
    /// answers a new one. The code also proves the email. `.weakPassword` leaves the code unspent;
    /// a wrong, used or expired code throws `.invalidToken`.
    @discardableResult
    public func resetPassword(code: String, newPassword: String) async throws -> Account {
        struct Body: Encodable {
            var token: String
            var password: String
        }
        return try await authenticate(
            try APIRequest(
                "POST", "/v1/sessions/password/reset/confirm",
                json: Body(token: code, password: newPassword)))
    }

    // MARK: - Sign-in finished in a browser

    /// Exchanges the one-time code a browser sign-in came back with for a session
    /// (`POST /v1/sessions/exchange {code, codeVerifier}`). The flow is Sign in with Apple on the
    /// web: the app opens `GET /v1/sessions/apple/start?return=<its URL>&code_challenge=<base64url
    /// SHA-256 of a random verifier>&code_challenge_method=S256` (in `ASWebAuthenticationSession`
    /// on Apple platforms), and the server sends the browser back to its URL with `code=`. The
    /// verifier binds the code to this app: without the right one the exchange is `.stateMismatch`.
    /// A code works once (`.signInCodeUsed`) for two minutes (`.signInCodeExpired`).
    @discardableResult
    public func exchangeSignInCode(_ code: String, codeVerifier: String) async throws -> Account {
        struct Body: Encodable {
            var code: String
            var codeVerifier: String
        }
        return try await authenticate(
            try APIRequest("POST", "/v1/sessions/exchange", json: Body(code: code, codeVerifier: codeVerifier)))
    }

    // MARK: - Sign in with Apple, linked

    /// Links Sign in with Apple to the signed-in account (`POST /v1/me/apple {identityToken}`), so
    /// the user can sign in with either from then on. `.appleIdInUse` when that Apple ID signs in
    /// to another account; `.reauthenticationRequired` when the account's email is unproven and
    /// its password was not given in the last minutes (sign in again, or verify the email first).
    @discardableResult
    public func linkApple(identityToken: String) async throws -> Account {
        struct Body: Encodable { var identityToken: String }
        let account = try await authorized(
            try APIRequest("POST", "/v1/me/apple", json: Body(identityToken: identityToken))
        )
        .decode(Account.self)
        if var current = try currentSession() {
            current.account = account
            try save(current)
        }
        return account
    }
}
