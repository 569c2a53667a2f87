import Core
import Foundation
import HTTP

/// Routes of SPEC §4.1: accounts, sessions, the appUserId link and API keys.
extension Gateway {
    struct SignUpBody: Decodable { var email: String; var password: String; var cloudkitRecordName: String? }
    struct SignInBody: Decodable { var email: String; var password: String }
    struct AppleBody: Decodable { var identityToken: String; var cloudkitRecordName: String? }
    struct RefreshBody: Decodable { var refreshToken: String }
    struct CloudKitBody: Decodable { var recordName: String }
    /// `mode` left out: the mode of the key making it.
    struct APIKeyBody: Decodable { var name: String; var role: Role; var mode: Mode? }

    /// `{account, session}` without the internal `created` flag.
    struct AuthBody: Encodable { var account: AccountView; var session: SessionTokens }

    /// An API key at creation: the listed fields plus the secret, once.
    struct CreatedKey: Encodable {
        var id: UUID, prefix: String, name: String, role: Role, mode: Mode, createdAt: Date, lastUsedAt: Date?, key: String
    }

    func addAccountRoutes(to r: inout Router) {
        r.post("/v1/accounts") { [self] req in
            try abuse.checkSignUp(ip: req.clientAddress)
            let b = try JSONBody.decode(SignUpBody.self, from: req)
            let result = try await accounts.request(Accounts.SignUp(email: b.email, password: b.password, cloudkitRecordName: b.cloudkitRecordName))
            return .json(201, AuthBody(account: result.account, session: result.session))
        }
        r.post("/v1/sessions") { [self] req in
            let b = try JSONBody.decode(SignInBody.self, from: req)
            try abuse.checkAuth(ip: req.clientAddress, email: b.email)
            let result = try await accounts.request(Accounts.SignIn(email: b.email, password: b.password))
            return .json(200, AuthBody(account: result.account, session: result.session))
        }
        r.post("/v1/sessions/apple") { [self] req in
            try abuse.checkAuth(ip: req.clientAddress, email: nil)
            let b = try JSONBody.decode(AppleBody.self, from: req)
            let result = try await accounts.request(Accounts.SignInWithApple(identityToken: b.identityToken, cloudkitRecordName: b.cloudkitRecordName))
            return .json(result.created ? 201 : 200, AuthBody(account: result.account, session: result.session))
        }
        r.post("/v1/sessions/refresh") { [self] req in
            let b = try JSONBody.decode(RefreshBody.self, from: req)
            let result = try await accounts.request(Accounts.Refresh(refreshToken: b.refreshToken))
            return .json(200, AuthBody(account: result.account, session: result.session))
        }
        r.delete("/v1/sessions/current") { [self] req in
            let user = try await auth.requireUser(req)
            _ = try await accounts.request(Accounts.SignOut(sessionId: user.session))
            // This gateway refuses the token at once; the others learn it from the event.
            auth.sessionRevoked(SessionRevoked(sessionId: user.session, until: Date().addingTimeInterval(901)))
            return .noContent()
        }
        r.get("/v1/me") { [self] req in
            let user = try await auth.requireUser(req)
            return .json(200, try await accounts.request(Accounts.Me(accountId: user.account)))
        }
        r.post("/v1/me/cloudkit") { [self] req in
            let user = try await auth.requireUser(req)
            let b = try JSONBody.decode(CloudKitBody.self, from: req)
            return .json(200, try await accounts.request(Accounts.LinkCloudKit(accountId: user.account, recordName: b.recordName)))
        }
        // A live admin key manages keys of both modes, a test one only test keys (accounts decides).
        r.post("/v1/api-keys") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            let b = try JSONBody.decode(APIKeyBody.self, from: req)
            let made = try await accounts.request(APIKeys.Create(name: b.name, role: b.role, mode: b.mode, callerMode: key.mode))
            let k = made.apiKey
            return .json(201, CreatedKey(id: k.id, prefix: k.prefix, name: k.name, role: k.role, mode: k.mode,
                                         createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, key: made.key))
        }
        r.get("/v1/api-keys") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            return .json(200, try await accounts.request(APIKeys.List(limit: try Query.limit(req), cursor: req.query["cursor"], callerMode: key.mode)))
        }
        r.delete("/v1/api-keys/{id}") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            guard let id = req.pathParameters["id"].flatMap(UUID.init(parsing:)) else {
                throw ServiceError(.notFound, "no such API key")
            }
            _ = try await accounts.request(APIKeys.Revoke(id: id, callerMode: key.mode))
            auth.apiKeyRevoked(id)
            return .noContent()
        }
    }
}
