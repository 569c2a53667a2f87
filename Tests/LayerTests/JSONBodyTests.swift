import Foundation
import Testing
@testable import Core
@testable import HTTP

@Suite struct JSONBodyTests {
    struct Input: Decodable { var code: String; var count: Int? }

    func request(_ body: String, contentType: String? = "application/json") -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/", headers: contentType.map { ["content-type": $0] } ?? [:], body: Data(body.utf8))
    }

    func decodeError<T: Decodable>(_ type: T.Type, _ body: String) -> HTTPError? {
        do { _ = try JSONBody.decode(T.self, from: request(body)); return nil } catch { return error as? HTTPError }
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

    @Test func aNulCharacterAnywhereIs422NamingItsField() {
        struct Nested: Decodable { var email: String; var tags: [String] }
        let nested = { (body: String) -> HTTPError? in self.decodeError(Nested.self, body) }
        let e = nested(#"{"email":"a@exa\u0000mple.com","tags":[]}"#)
        #expect(e?.status == 422)
        #expect(e?.field == "email")
        #expect(nested(#"{"email":"a@b.c","tags":["ok","p\u0000"]}"#)?.field == "tags[1]")
        // An escaped backslash before "u0000" is six plain characters, not NUL.
        #expect(nested(#"{"email":"a\\u0000@b.c","tags":[]}"#) == nil)
    }

    /// The byte search behind the NUL check and the access log's one-time paths: a partial
    /// match that restarts, a match at either end, and a needle longer than the text.
    @Test func byteSearchFindsEveryPlacementAndNoFalseOne() {
        #expect("aaab".containsBytes("aab"))
        #expect("{token}/x".containsBytes("{token}") && "/x/{token}".containsBytes("{token}"))
        #expect(!"/x/{toke}".containsBytes("{token}") && !"{tok".containsBytes("{token}") && !"".containsBytes("a"))
        #expect("é{token}".containsBytes("{token}") && "anything".containsBytes(""))
        #expect(JSONBody.mayHoldNul(Data(#"{"a":"x\u0000"}"#.utf8)))
        #expect(!JSONBody.mayHoldNul(Data(#"{"a":"\u000"}"#.utf8)))
    }

    @Test func impossibleOrFarTimesAre422() throws {
        struct When: Decodable { var at: Date }
        for text in ["2027-02-30T00:00:00Z", "2027-01-01T25:00:00Z", "2027-01-01T10:00:60Z", "294277-01-01T00:00:00Z", "2027-13-01T00:00:00Z"] {
            do {
                _ = try JSONBody.decode(When.self, from: request(#"{"at":"\#(text)"}"#))
                Issue.record("\(text) was accepted")
            } catch let e as HTTPError {
                #expect(e.status == 422 && e.field == "at", "\(text)")
            }
        }
        let leap = try JSONBody.decode(When.self, from: request(#"{"at":"2028-02-29T23:59:59.500Z"}"#))
        #expect(Timestamp.iso8601(leap.at) == "2028-02-29T23:59:59.500Z")
    }

    @Test func anUnknownEnumValueIsNamedWithoutSwiftTypes() {
        enum Role: String, Decodable { case admin, support }
        struct Key: Decodable { var role: Role }
        do {
            _ = try JSONBody.decode(Key.self, from: request(#"{"role":"superuser"}"#))
            Issue.record("accepted")
        } catch let e as HTTPError {
            #expect(e.field == "role")
            #expect(!e.message.contains("Cannot initialize"))
        } catch { Issue.record("\(error)") }
    }

    @Test func brokenJSONIs400() {
        let e = error(request(#"{"code": "#))
        #expect(e?.status == 400)
        #expect(e?.code == "malformedJson")
        #expect(error(request(""))?.code == "malformedJson")
    }

    /// Bytes that are not UTF-8 inside a string are not JSON: 400, not a 422 that blames a field
    /// (the search for a wrong number once named `email` as "a number out of range").
    @Test func invalidUTF8Is400MalformedJson() {
        for bytes in [[0xff, 0xfe], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]] as [[UInt8]] {
            let body = Data(#"{"code": ""#.utf8) + Data(bytes) + Data(#"", "count": 1}"#.utf8)
            let e = error(HTTPRequest(method: "POST", path: "/", headers: ["content-type": "application/json"], body: body))
            #expect(e?.status == 400, "bytes \(bytes)")
            #expect(e?.code == "malformedJson")
            #expect(e?.field == nil)
        }
        // The same shape in valid UTF-8 (é, a character beyond the BMP) decodes.
        #expect(error(request(#"{"code": "é😀", "count": 1}"#)) == nil)
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

    struct Nested: Decodable {
        struct Duration: Decodable { var unit: String; var count: Int }
        var code: String
        var duration: Duration
        var cap: Int?
    }

    /// A number no Swift type holds is valid JSON: 422 naming its field (it was 400 `malformedJson`,
    /// because Foundation reports it without a path and JSONSerialization refuses the document).
    @Test func aNumberOutOfEveryRangeIs422NamingItsField() {
        for (body, field) in [(#"{"code":"A","duration":{"unit":"day","count":1},"cap":1e400}"#, "cap"),
                              (#"{"code":"A","duration":{"unit":"day","count":1e400}}"#, "duration.count"),
                              (#"{"code":"A","duration":{"unit":"day","count":1},"cap":\#(String(repeating: "9", count: 5000))}"#, "cap")] {
            let e = decodeError(Nested.self, body)
            #expect(e?.status == 422, "\(field)")
            #expect(e?.field == field)
        }
        // Unknown fields are still ignored, however large; broken JSON is still 400.
        #expect(decodeError(Nested.self, #"{"code":"A","duration":{"unit":"day","count":1},"extra":1e400}"#) == nil)
        #expect(decodeError(Nested.self, #"{"code":"A","cap":1e400"#)?.status == 400)
    }

    @Test func aWrongNumberInANestedObjectNamesTheNestedField() {
        let fraction = decodeError(Nested.self, #"{"code":"A","duration":{"unit":"day","count":1.5}}"#)
        #expect(fraction?.status == 422)
        #expect(fraction?.field == "duration.count")
        let tooLarge = decodeError(Nested.self, #"{"code":"A","duration":{"unit":"day","count":1},"cap":1e308}"#)
        #expect(tooLarge?.field == "cap")
    }

    /// Finding the field decodes the body once per try, so the tries are bounded: behind more
    /// numbers and keys than that, the wrong number is still 422, only without its field.
    @Test func theSearchForAWrongNumberIsBounded() {
        let decoys = (0..<JSONBody.culpritTries).map { #""a\#($0)":[1,2]"# }.joined(separator: ",")
        let body = #"{\#(decoys),"code":"A","duration":{"unit":"day","count":1},"cap":12.5}"#
        let e = decodeError(Nested.self, body)
        #expect(e?.status == 422)
        #expect(e?.field == nil)
        #expect(e?.message.contains("number") == true, "\(String(describing: e?.message))")
        // Within the bound it is named.
        let near = decodeError(Nested.self, #"{"a":[1,2],"code":"A","duration":{"unit":"day","count":1},"cap":12.5}"#)
        #expect(near?.field == "cap")
    }
}
