import Core
import Foundation
import HTTP

/// Members: operator accounts with a role. An admin invites by email and gets a one-time
/// invite URL (there is no mail outbox yet); accepting it sets a password (or joins the email's
/// existing account) and signs the member in. A member's session reaches the operator routes as a
/// key of its role, in the mode its `Redeem-Mode` header names.
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
            "password": [.note("a new account's password (at least 10 characters), or the password of the invited email's existing account")],
        ]
        var token: String
        var password: String
    }
    /// An invitation as made: its token and the URL that carries it, shown this once.
    struct CreatedInvite: APIBody, Encodable {
        static let schemaName: String? = "CreatedMemberInvite"
        var id: UUID, email: String, role: Role, createdAt: Date, expiresAt: Date, token: String, inviteUrl: String
    }

    static let memberRoutes: [APIRoute] = [
        .route(.post, "/v1/members", "Invite a member (the one-time invite URL is shown once)", access: .key(.admin),
               answers: [201: .json(CreatedInvite.self)], errors: [422], handle: Gateway.inviteMember),
        .route(.get, "/v1/members", "List members, newest first", access: .key(.admin), query: QueryParameter.page,
               answers: [200: .json(Page<MemberView>.self)], errors: [422], handle: Gateway.listMembers),
        .route(.patch, "/v1/members/{id}", "Change a member's role (their sessions end)", access: .key(.admin),
               answers: [200: .json(MemberView.self)], errors: [404, 422], handle: Gateway.changeMember),
        .route(.delete, "/v1/members/{id}", "Remove a member (the account stays; its sessions end)", access: .key(.admin),
               answers: [204: .empty], errors: [404], handle: Gateway.removeMember),
        .route(.post, "/v1/members/accept", "Accept an invitation: sets the password and signs the member in",
               answers: [200: .json(AuthBody.self), 201: .json(AuthBody.self)], errors: [401, 403, 422, 429], handle: Gateway.acceptInvite),
    ]

    /// Members reach both modes, so a test key, which reaches only test objects, manages none.
    static func checkManagesMembers(_ key: Authenticator.Key) throws {
        guard key.actor.type == .member || key.mode == .live else {
            throw ServiceError(.forbidden, "a test key can't manage members, who reach live mode too")
        }
    }

    func inviteMember(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<MemberInviteBody>) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let b = try body.read()
        let made = try await accounts.request(Members.Invite(email: b.email, role: b.role, mode: key.mode).by(key.actor))
        let i = made.invite
        return .json(201, CreatedInvite(id: i.id, email: i.email, role: i.role, createdAt: i.createdAt, expiresAt: i.expiresAt, token: made.token,
                                        inviteUrl: Self.inviteURL(host: req.header("host"), token: made.token)))
    }

    /// The dashboard's address on the host the admin reached, with the token in the fragment (a
    /// fragment never reaches a server's logs): `http` on loopback, `https` anywhere else.
    static func inviteURL(host: String?, token: String) -> String {
        let host = host.flatMap { h in h.allSatisfy { $0.isLetter || $0.isNumber || ".-:[]".contains($0) } && !h.isEmpty ? h : nil } ?? "localhost"
        let bare = host.hasPrefix("[") ? String(host.prefix { $0 != "]" }.dropFirst()) : String(host.prefix { $0 != ":" })
        let local = ["localhost", "127.0.0.1", "::1"].contains(bare.lowercased())
        return "\(local ? "http" : "https")://\(host)/dashboard#invite=\(token)"
    }

    func listMembers(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        return .json(200, try await accounts.request(Members.List(limit: try Query.limit(req), cursor: req.query["cursor"])))
    }

    func changeMember(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<MemberPatchBody>) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let id = try req.id(or: "no such member")
        let b = try body.read()
        return .json(200, try await accounts.request(Members.Update(id: id, role: b.role, mode: key.mode).by(key.actor)))
    }

    func removeMember(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.checkManagesMembers(key)
        let id = try req.id(or: "no such member")
        _ = try await accounts.request(Members.Remove(id: id, mode: key.mode).by(key.actor))
        return .noContent()
    }

    func acceptInvite(_ req: HTTPRequest, _ body: Incoming<AcceptInviteBody>) async throws -> HTTPResponse {
        try abuse.checkSignUp(ip: req.clientAddress)
        let b = try body.read()
        let result = try await accounts.request(Members.Accept(token: b.token, password: b.password))
        return .json(result.created ? 201 : 200, AuthBody(account: result.account, session: result.session))
    }
}
