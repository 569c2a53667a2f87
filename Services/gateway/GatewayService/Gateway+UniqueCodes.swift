import Core
import Foundation
import HTTP

/// Unique single-use codes of a coupon: made by the thousand, their CSV downloaded once (by an
/// operator key, or by whoever holds the one-time address), then 410. The codes are in no other
/// answer, so a tool that calls these routes for a model (MCP's `create_codes`) hands it a count
/// and an address, never a code.
extension Gateway {
    /// Making 100,000 codes takes a few seconds: more than a bus request is given by default.
    static let createCodesTimeout: Duration = .seconds(60)

    static let uniqueCodeRoutes: [APIRoute] = [
        .route(
            .post, "/v1/coupons/{code}/codes", "Make unique single-use codes of a coupon (their CSV downloads once)",
            access: .appKey(.admin), answers: [201: .json(CodesCreated.self)], errors: [404, 422],
            handle: Gateway.createCodes),
        .route(
            .get, "/v1/coupons/{code}/codes.csv", "The CSV of a coupon's new unique codes: once, then 410",
            access: .appKey(.admin), answers: [200: .text("text/csv")], errors: [404, 410],
            handle: Gateway.codesCSV),
        .route(
            .get, "/v1/code-downloads/{token}", "The CSV of new unique codes by its one-time address: once, then 410",
            answers: [200: .text("text/csv")], errors: [410], handle: Gateway.codesDownload)
    ]

    func createCodes(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<CodesInput>
    ) async throws -> HTTPResponse {
        let input = try body.read()
        let made = try await coupons.request(
            Coupons.CreateCodes(code: req.pathParameters["code"] ?? "", mode: key.mode, app: key.app, input: input).by(key.actor),
            timeout: Self.createCodesTimeout)
        let origin = Self.origin(req)
        return .json(
            201,
            CodesCreated(
                code: made.code, count: made.count, prefix: made.prefix,
                csvUrl: origin + "/v1/coupons/" + Self.pathSegment(made.code) + "/codes.csv",
                downloadUrl: origin + "/v1/code-downloads/" + made.downloadToken, expiresAt: made.expiresAt))
    }

    func codesCSV(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        Self.csvAttachment(
            try await coupons.request(
                Coupons.TakeCodes(
                    code: req.pathParameters["code"] ?? "", mode: key.mode,
                    app: key.app)))
    }

    func codesDownload(_ req: HTTPRequest) async throws -> HTTPResponse {
        let token = req.pathParameters["token"] ?? ""
        // A token is 43 characters of URL-safe base64; anything else was never given out.
        guard token.count == 43, token.utf8.allSatisfy({ Self.tokenBytes.contains($0) }) else {
            throw ServiceError(.downloadGone, "this download address was used already, or has expired")
        }
        return Self.csvAttachment(try await coupons.request(Coupons.TakeCodes(token: token)))
    }

    static let tokenBytes = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The codes as a file to save (the gateway's answers all carry `Cache-Control: no-store`).
    static func csvAttachment(_ taken: Coupons.TakeCodes.Response) -> HTTPResponse {
        let filename = taken.code.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", "text/csv; charset=utf-8"),
                ("Content-Disposition", "attachment; filename=\"codes-\(filename).csv\"")
            ], body: Data(taken.csv.utf8))
    }

    /// A coupon's code in a path: its characters (A-Z, 0-9, - and _) need no escaping.
    static func pathSegment(_ code: String) -> String {
        code.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/")))
            ?? code
    }
}
