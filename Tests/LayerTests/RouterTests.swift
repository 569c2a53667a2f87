import Foundation
import Testing
@testable import Core
@testable import HTTP

@Suite struct RouterTests {
    func router() -> Router {
        var r = Router()
        r.get("/v1/coupons/{code}") { req in .text(200, "get \(req.pathParameters["code"] ?? "")") }
        r.post("/v1/coupons/validate") { _ in .text(200, "validate") }
        r.delete("/v1/coupons/{code}") { _ in .noContent() }
        r.get("/boom") { _ in throw HTTPError(422, "invalid", "bad", field: "limit") }
        return r
    }

    @Test func fillsPathParametersAndRecordsTheTemplate() async {
        let resp = await router().handle(HTTPRequest(method: "GET", path: "/v1/coupons/SPRING-25"))
        #expect(resp.status == 200)
        #expect(String(decoding: resp.body, as: UTF8.self) == "get SPRING-25")
        #expect(resp.route == "/v1/coupons/{code}")
    }

    @Test func literalSegmentsWinOverParameters() async {
        let resp = await router().handle(HTTPRequest(method: "POST", path: "/v1/coupons/validate"))
        #expect(String(decoding: resp.body, as: UTF8.self) == "validate")
    }

    @Test func aWiderTemplateWithTheRightMethodBeatsANarrowerOneWithout() async {
        // GET /v1/coupons/validate is reading the coupon named VALIDATE, not a 405 from the POST route.
        let get = await router().handle(HTTPRequest(method: "GET", path: "/v1/coupons/validate"))
        #expect(get.status == 200)
        #expect(String(decoding: get.body, as: UTF8.self) == "get validate")
        #expect(get.route == "/v1/coupons/{code}")
        let head = await router().handle(HTTPRequest(method: "HEAD", path: "/v1/coupons/X"))
        #expect(head.status == 200, "HEAD is answered by the GET route")
    }

    @Test func unknownPathIs404AndWrongMethodIs405() async throws {
        let r = router()
        let missing = await r.handle(HTTPRequest(method: "GET", path: "/v1/nothing"))
        #expect(missing.status == 404)
        #expect(String(decoding: missing.body, as: UTF8.self).contains("routeNotFound"))
        let wrong = await r.handle(HTTPRequest(method: "PUT", path: "/v1/coupons/X"))
        #expect(wrong.status == 405)
        #expect(wrong.header("Allow") == "DELETE, GET")
        let literal = await r.handle(HTTPRequest(method: "PUT", path: "/v1/coupons/validate"))
        #expect(literal.header("Allow") == "POST", "only the methods of the most specific template")
        #expect(String(decoding: wrong.body, as: UTF8.self).contains("methodNotAllowed"))
    }

    @Test func thrownErrorsBecomeTheErrorShape() async throws {
        let resp = await router().handle(HTTPRequest(method: "GET", path: "/boom"))
        #expect(resp.status == 422)
        let body = try JSONDecoder().decode(ErrorBody.self, from: resp.body)
        #expect(body.error.code == "invalid")
        #expect(body.error.field == "limit")
    }
}
