import Foundation
import Testing
@testable import Shared

@Suite struct JSONBodyTests {
    struct Input: Decodable { var code: String; var count: Int? }

    func request(_ body: String, contentType: String? = "application/json") -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/", headers: contentType.map { ["content-type": $0] } ?? [:], body: Data(body.utf8))
    }

    func error(_ r: HTTPRequest) -> HTTPError? {
        do { _ = try JSONBody.decode(Input.self, from: r); return nil } catch { return error as? HTTPError }
    }

    @Test func decodesAndIgnoresUnknownFields() throws {
        let v = try JSONBody.decode(Input.self, from: request(#"{"code":"A","extra":[1,2],"count":2}"#, contentType: "application/json; charset=utf-8"))
        #expect(v.code == "A")
        #expect(v.count == 2)
    }

    @Test func jsonContentTypesInAnyCaseAndWithParametersAreAccepted() {
        for type in ["application/json", "Application/JSON", "application/json;charset=utf-8", "application/problem+json"] {
            #expect(error(request(#"{"code":"A"}"#, contentType: type)) == nil, "\(type)")
        }
    }

    @Test func wrongContentTypeIs415() {
        #expect(error(request(#"{"code":"A"}"#, contentType: "text/plain"))?.status == 415)
        #expect(error(request(#"{"code":"A"}"#, contentType: nil))?.status == 415)
    }

    @Test func brokenJSONIs400() {
        let e = error(request(#"{"code": "#))
        #expect(e?.status == 400)
        #expect(e?.code == "malformedJson")
        #expect(error(request(""))?.code == "malformedJson")
    }

    @Test func nestingDeeperThan32Is400() {
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        #expect(error(request(#"{"code":"A","x":"# + deep + "}"))?.code == "malformedJson")
        let ok = String(repeating: "[", count: 30) + String(repeating: "]", count: 30)
        #expect(error(request(#"{"code":"A","x":"# + ok + "}")) == nil)
        // Brackets inside strings don't count.
        #expect(error(request(#"{"code":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}"#)) == nil)
        // Nor after an escaped quote, which does not end the string.
        #expect(error(request(#"{"code":"a\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"}"#)) == nil)
    }

    @Test func notAnObjectOrMissingFieldIs422NamingIt() {
        let notObject = error(request("[1,2]"))
        #expect(notObject?.status == 422)
        #expect(notObject?.field == nil)
        let missing = error(request(#"{"count":1}"#))
        #expect(missing?.status == 422)
        #expect(missing?.field == "code")
        let wrongType = error(request(#"{"code":5}"#))
        #expect(wrongType?.field == "code")
    }
}
