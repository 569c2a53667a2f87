import Core
import Foundation
import HTTP

/// A coupon's redemptions as a one-time download address: a count and an address a person opens
/// without a key, once, then 410. The CSV is made at the download, exactly as
/// `GET /v1/coupons/{code}/redemptions` with `Accept: text/csv` makes it, in the mode of the key that
/// asked. A tool that calls this for a model (MCP's `export_redemptions_csv`) hands it the count and
/// the address, never a row.
extension Gateway {
    static let redemptionExportRoutes: [APIRoute] = [
        .route(
            .post, "/v1/coupons/{code}/redemption-exports",
            "A one-time address (24 hours) where a person downloads a coupon's redemptions as CSV without a key",
            access: .appKey(.readonly), answers: [201: .json(RedemptionExport.self)], errors: [404],
            handle: Gateway.exportRedemptions),
        .route(
            .get, "/v1/redemption-downloads/{token}",
            "A coupon's redemptions as CSV by its one-time address: once, then 410",
            answers: [200: .text("text/csv")], errors: [410], handle: Gateway.redemptionsDownload)
    ]

    func exportRedemptions(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let made = try await coupons.request(
            Coupons.ExportRedemptions(code: req.pathParameters["code"] ?? "", mode: key.mode, app: key.app))
        return .json(
            201,
            RedemptionExport(
                code: made.code, count: made.count,
                downloadUrl: Self.origin(req) + "/v1/redemption-downloads/" + made.downloadToken,
                expiresAt: made.expiresAt))
    }

    func redemptionsDownload(_ req: HTTPRequest) async throws -> HTTPResponse {
        let token = req.pathParameters["token"] ?? ""
        // A token is 43 characters of URL-safe base64; anything else was never given out.
        guard token.count == 43, token.utf8.allSatisfy({ Self.tokenBytes.contains($0) }) else {
            throw ServiceError(.downloadGone, "this download address was used already, or has expired")
        }
        let taken = try await coupons.request(Coupons.TakeRedemptionExport(token: token))
        return try await exportCSV(code: taken.code, mode: taken.mode, app: DefaultApp.of(taken.app))
    }
}
