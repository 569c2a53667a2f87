import Core
import Foundation
import HTTP

/// Members: operator accounts with a role. An admin invites by email and gets a one-time
/// invite URL, which accounts also mails when it sends mail; accepting it sets a password (or joins the email's
/// existing account) and signs the member in. A member's session reaches the operator routes as a
/// key of its role, in the mode its `Redeem-Mode` header names. A member has a role in each app
/// they are in: these routes work in the caller's app (a key's, or the one a member's `Redeem-App`
/// names), and invite to, list, change and remove from that app only. The settings (TOTP) are the
/// whole deployment's, so the default app's admins keep them.
extension Gateway {
    struct MemberInviteBody: APIBody {
        static let schemaName: String? = "MemberInviteInput"
        var email: String
        var role: Role
    }
    struct MemberPatchBody: APIBody {
        static let schemaName: String? = "MemberPatch"
        var role: Role
    }
    struct AcceptInviteBody: APIBody {
        static let schemaName: String? = "AcceptInvite"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "password": [
                .note(
                    "a new account's password (at least 10 characters), or the password of the invited email's existing account"
                )
            ]
        ]
        var token: String
        var password: String
    }
    struct TOTPCodeBody: APIBody {
        static let schemaName: String? = "TOTPCode"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "code": [.note("6 digits from the authenticator app (to turn off: or a recovery code)")]
        ]
        var code: String
    }
    struct TOTPSetupBody: APIBody, Encodable {
        static let schemaName: String? = "TOTPSetup"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "secret": [.note("base32, for typing into an authenticator app; shown this once")],
            "uri": [.note("otpauth://totp/… for a QR code")]
        ]
        var secret: String
        var uri: String
    }
    struct RecoveryCodesBody: APIBody, Encodable {
        static let schemaName: String? = "RecoveryCodes"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "recoveryCodes": [.note("ten codes, each works once in place of a TOTP code; shown this once")]
        ]
        var recoveryCodes: [String]
    }
    struct MemberSettingsBody: APIBody, Encodable {
        static let schemaName: String? = "MemberSettings"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "requireTotp": [
                .note("every member must have TOTP: a member without it signs in with no role until they turn it on")
            ]
        ]
        var requireTotp: Bool
    }
    /// An invitation as made: its token and the URL that carries it, shown this once.
    struct CreatedInvite: APIBody, Encodable {
        static let schemaName: String? = "CreatedMemberInvite"
        var id: UUID, email: String, role: Role, createdAt: Date, expiresAt: Date, token: String, inviteUrl: String
        /// Whether the invitation was mailed to `email` too (the server sends mail).
        var mailed: Bool
    }

    static let memberRoutes: [APIRoute] = [
        .route(
            .post, "/v1/members", "Invite a member to the app (the one-time invite URL is shown once)",
            access: .appKey(.admin),
            answers: [201: .json(CreatedInvite.self)], errors: [422], handle: Gateway.inviteMember),
        .route(
            .get, "/v1/members", "List the app's members with their role in it, newest first", access: .appKey(.admin), query: QueryParameter.page,
            answers: [200: .json(Page<MemberView>.self)], errors: [422], handle: Gateway.listMembers),
        .route(
            .get, "/v1/members/invites", "List the app's pending invitations (never their tokens), newest first",
            access: .appKey(.admin),
            query: QueryParameter.page, answers: [200: .json(Page<MemberInviteView>.self)], errors: [422],
            handle: Gateway.listInvites),
        .route(
            .delete, "/v1/members/invites/{id}", "Revoke a pending invitation: its URL no longer makes a member",
            access: .appKey(.admin),
            answers: [204: .empty], errors: [404], handle: Gateway.revokeInvite),
        .route(
            .patch, "/v1/members/{id}", "Change a member's role in the app (their sessions end)",
            access: .appKey(.admin),
            answers: [200: .json(MemberView.self)], errors: [404, 422], handle: Gateway.changeMember),
        .route(
            .delete, "/v1/members/{id}", "Remove a member from the app (the account stays; its sessions end)", access: .appKey(.admin),
            answers: [204: .empty], errors: [404], handle: Gateway.removeMember),
        .route(
            .get, "/v1/members/settings", "What applies to every member (whether TOTP is required)",
            access: .key(.admin),
            answers: [200: .json(MemberSettingsBody.self)], handle: Gateway.memberSettings),
        .route(
            .patch, "/v1/members/settings", "Require TOTP of every member, or not (sessions opened without it end)",
            access: .key(.admin),
            answers: [200: .json(MemberSettingsBody.self)], errors: [422], handle: Gateway.changeMemberSettings),
        .route(
            .post, "/v1/me/totp", "A member starts TOTP: a new secret, waiting for its first code", access: .user,
            answers: [200: .json(TOTPSetupBody.self)], errors: [403, 404, 409],
            handle: Gateway.startTOTP),
        .route(
            .post, "/v1/me/totp/confirm",
            "A member turns TOTP on with a first code: recovery codes, shown once; their sessions end",
            access: .user, answers: [200: .json(RecoveryCodesBody.self)],
            errors: [401, 404, 409, 422, 429], handle: Gateway.confirmTOTP),
        .route(
            .post, "/v1/me/totp/disable", "A member turns TOTP off with a current or recovery code", access: .user,
            answers: [204: .empty], errors: [401, 404, 409, 422, 429], handle: Gateway.disableTOTP),
        .route(
            .post, "/v1/members/accept", "Accept an invitation: sets the password and signs the member in",
            answers: [200: .json(AuthBody.self), 201: .json(AuthBody.self)], errors: [401, 403, 422, 429],
            handle: Gateway.acceptInvite)
    ]

    /// Members reach both modes, so a test key, which reaches only test objects, manages none.
    static func checkManagesMembers(_ key: Authenticator.Key) throws {
        guard key.actor.type == .member || key.mode == .live else {
            throw ServiceError(.forbidden, "a test key can't manage members, who reach live mode too")
        }
    }

    func inviteMember(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<MemberInviteBody>
    ) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let b = try body.read()
        let made = try await accounts.request(
            Members.Invite(
                email: b.email, role: b.role, mode: key.mode, dashboardUrl: Self.dashboardURL(req), app: key.app)
                .by(key.actor))
        let i = made.invite
        return .json(
            201,
            CreatedInvite(
                id: i.id, email: i.email, role: i.role, createdAt: i.createdAt, expiresAt: i.expiresAt,
                token: made.token,
                inviteUrl: Self.inviteURL(req, token: made.token), mailed: made.mailed ?? false))
    }

    /// The dashboard's address on the host the admin reached, with the token in the fragment (a
    /// fragment never reaches a server's logs): `http` on loopback, `https` anywhere else.
    static func inviteURL(_ req: HTTPRequest, token: String) -> String { dashboardURL(req) + "#invite=\(token)" }
    static func dashboardURL(_ req: HTTPRequest) -> String { origin(req) + "/dashboard" }

    func listMembers(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        return .json(
            200,
            try await accounts.request(
                Members.List(limit: try Query.limit(req), cursor: req.query["cursor"], app: key.app)))
    }

    func listInvites(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        return .json(
            200,
            try await accounts.request(
                Members.ListInvites(limit: try Query.limit(req), cursor: req.query["cursor"], app: key.app)))
    }

    func revokeInvite(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let id = try req.id(or: "no such pending invitation")
        _ = try await accounts.request(Members.RevokeInvite(id: id, mode: key.mode, app: key.app).by(key.actor))
        return .noContent()
    }

    func changeMember(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<MemberPatchBody>
    ) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let id = try req.id(or: "no such member")
        let b = try body.read()
        return .json(
            200,
            try await accounts.request(
                Members.Update(id: id, role: b.role, mode: key.mode, app: key.app).by(key.actor)))
    }

    func removeMember(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let id = try req.id(or: "no such member")
        _ = try await accounts.request(Members.Remove(id: id, mode: key.mode, app: key.app).by(key.actor))
        return .noContent()
    }

    func memberSettings(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        return .json(
            200, MemberSettingsBody(requireTotp: try await accounts.request(Members.GetSettings()).requireTotp))
    }

    func changeMemberSettings(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<MemberSettingsBody>
    ) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let b = try body.read()
        let after = try await accounts.request(
            Members.SetSettings(requireTotp: b.requireTotp, mode: key.mode).by(key.actor))
        return .json(200, MemberSettingsBody(requireTotp: after.requireTotp))
    }

    func startTOTP(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        let setup = try await accounts.request(Members.StartTOTP(accountId: user.account))
        return .json(200, TOTPSetupBody(secret: setup.secret, uri: setup.uri))
    }

    func confirmTOTP(
        _ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<TOTPCodeBody>
    ) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let b = try body.read()
        return .json(
            200,
            RecoveryCodesBody(
                recoveryCodes: try await accounts.request(Members.ConfirmTOTP(accountId: user.account, code: b.code))
                    .recoveryCodes))
    }

    func disableTOTP(
        _ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<TOTPCodeBody>
    ) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let b = try body.read()
        _ = try await accounts.request(Members.DisableTOTP(accountId: user.account, code: b.code))
        return .noContent()
    }

    func acceptInvite(_ req: HTTPRequest, _ body: Incoming<AcceptInviteBody>) async throws -> HTTPResponse {
        try abuse.checkSignUp(ip: req.clientAddress)
        let b = try body.read()
        let result = try await accounts.request(Members.Accept(token: b.token, password: b.password))
        return .json(result.created ? 201 : 200, AuthBody(account: result.account, session: result.session))
    }
}
