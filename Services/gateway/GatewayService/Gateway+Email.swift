import Core
import Foundation
import HTTP

/// Email verification and password reset: accounts mails a code, the pilot sends it
/// back. Without SMTP settings on accounts these answer 403 `mailNotConfigured`.
extension Gateway {
    struct EmailConfirmBody: APIBody {
        static let schemaName: String? = "EmailConfirmation"
        var token: String
    }
    struct PasswordResetRequestBody: APIBody {
        static let schemaName: String? = "PasswordResetRequest"
        var email: String
    }
    struct PasswordResetBody: APIBody {
        static let schemaName: String? = "PasswordReset"
        var token: String
        var password: String
    }

    static let emailRoutes: [APIRoute] = [
        .route(.post, "/v1/me/email/verify", "Mail a verification code to the signed-in account's email", access: .user,
               answers: [202: .empty], errors: [403, 404, 409, 429], handle: Gateway.sendEmailVerification),
        .route(.post, "/v1/accounts/email/confirm", "Verify an email with the code mailed to it", answers: [204: .empty],
               errors: [401, 422, 429], handle: Gateway.confirmEmail),
        // The same 202 whether or not an account has the email (no account enumeration).
        .route(.post, "/v1/sessions/password/reset", "Mail a password reset code to an account's email", answers: [202: .empty],
               errors: [403, 422, 429], handle: Gateway.requestPasswordReset),
        .route(.post, "/v1/sessions/password/reset/confirm", "Set a new password with a reset code; ends every session and signs in",
               answers: [200: .json(AuthBody.self)], errors: [401, 422, 429], handle: Gateway.resetPassword),
    ]

    func sendEmailVerification(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        try abuse.checkMail(account: user.account)
        _ = try await accounts.request(Accounts.SendEmailVerification(accountId: user.account, clientAddress: req.clientAddress))
        return HTTPResponse(status: 202)
    }

    func confirmEmail(_ req: HTTPRequest, _ body: Incoming<EmailConfirmBody>) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let b = try body.read()
        _ = try await accounts.request(Accounts.ConfirmEmail(token: b.token))
        return .noContent()
    }

    func requestPasswordReset(_ req: HTTPRequest, _ body: Incoming<PasswordResetRequestBody>) async throws -> HTTPResponse {
        let b = try body.read()
        try abuse.checkAuth(ip: req.clientAddress, email: b.email)
        _ = try await accounts.request(Accounts.RequestPasswordReset(email: b.email, clientAddress: req.clientAddress))
        return HTTPResponse(status: 202)
    }

    func resetPassword(_ req: HTTPRequest, _ body: Incoming<PasswordResetBody>) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let b = try body.read()
        let result = try await accounts.request(Accounts.ResetPassword(token: b.token, password: b.password))
        // This gateway refuses the revoked sessions' tokens as soon as the event arrives; the
        // answer's session is new.
        return .json(200, AuthBody(account: result.account, session: result.session))
    }
}
