import Foundation
import TestSupport
import Testing
@testable import Core
@testable import Telemetry
@testable import Bus
@testable import HTTP
@testable import Runtime

/// A reply that carries a view in its public JSON form, as coupons answers validate and redeem.
struct Show: BusRequest {
    static let type = "test.show"
    struct View: Codable, Sendable, Equatable { var name: String; var at: Date }
    struct Response: Codable, Sendable {
        var note: String
        var view: WireJSON<View>?
    }
    var name: String
}

@Suite struct WireJSONTests {
    let bus = BusNode(BusOptions(security: .plain), logger: Logger(service: "test", sink: LogSink(capturing: ())))
    let logger = Logger(service: "test", sink: LogSink(capturing: ()))
    static let at = Date(timeIntervalSince1970: 1_764_483_573.125)

    func router() -> BusRouter {
        var router = BusRouter(logger: logger)
        router.on(Show.self) { req, _ in
            Show.Response(note: "shown", view: req.name.isEmpty ? nil : try WireJSON(Show.View(name: req.name, at: Self.at)))
        }
        return router
    }

    @Test func aViewCrossesTheBusAsTheBytesTheGatewaySends() async throws {
        let port = try await offThePool { try Project.freePort() }
        let server = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:\(port)"], router: router(), logger: logger)
        defer { server.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [server.endpoint])
        defer { client.stop() }

        let reply = try await client.request(Show(name: "a/b"))
        #expect(reply.note == "shown")
        let bytes = try #require(reply.view?.bytes)
        // Exactly what the HTTP side would have encoded itself: ISO 8601 time, unescaped slash.
        #expect(bytes == (try JSONEncoder.wire().encode(Show.View(name: "a/b", at: Self.at))))
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"at":"2025-11-30T06:19:33.125Z","name":"a/b"}"#)
        #expect(try reply.view?.decoded() == Show.View(name: "a/b", at: Self.at))
        #expect(HTTPResponse.json(200, try #require(reply.view)).body == bytes)

        let none = try await client.request(Show(name: ""))
        #expect(none.view == nil)
    }

    @Test func theEnvelopeHoldsTheFrameNumberAndTheBytesFollowIt() async throws {
        let request = try JSONEncoder.bus.encode(Envelope(id: "r1", type: Show.type, frames: true, body: Show(name: "x")))
        let frames = await router().handle(request)
        #expect(frames.count == 2)
        let envelope = try #require(try JSONSerialization.jsonObject(with: frames[0]) as? [String: Any])
        let body = try #require(envelope["body"] as? [String: Any])
        #expect(body["view"] as? Int == 0)
        #expect(frames[1] == (try JSONEncoder.wire().encode(Show.View(name: "x", at: Self.at))))
        // A frame number with no frame behind it is a malformed reply, not a crash.
        #expect(throws: DecodingError.self) { try JSONDecoder.busFrames(ReplyEnvelope<Show.Response>.self, from: frames.prefix(1)) }
    }

    @Test func aCallerThatDoesNotReadFramesGetsTheViewInline() async throws {
        // An earlier gateway: no `frames` in its envelope, and the view's own type in its reply type.
        struct OldResponse: Decodable { var note: String; var view: Show.View }
        let request = try JSONEncoder.bus.encode(Envelope(id: "r1", type: Show.type, body: Show(name: "x")))
        let frames = await router().handle(request)
        #expect(frames.count == 1)
        let reply = try JSONDecoder.bus.decode(ReplyEnvelope<Empty>.self, from: frames[0])
        #expect(reply.error == nil)
        struct Old: Decodable { var body: OldResponse }
        #expect(try JSONDecoder.bus.decode(Old.self, from: frames[0]).body.view == Show.View(name: "x", at: Self.at))
    }

    @Test func aPeerThatSendsTheViewInlineStillReads() throws {
        // An earlier coupons instance answers with the view inside the envelope (bus dates in ms).
        let inline = #"{"v":1,"id":"r1","body":{"note":"shown","view":{"name":"x","at":1764483573125}}}"#
        let reply = try JSONDecoder.busFrames(ReplyEnvelope<Show.Response>.self, from: [Data(inline.utf8)])
        #expect(reply.body?.view?.bytes == (try JSONEncoder.wire().encode(Show.View(name: "x", at: Self.at))))
    }

    /// The validate answer keeps the shape earlier versions speak unless the caller reads frames.
    @Test func aValidateAnswerSpeaksBothShapes() throws {
        let answer = Coupons.Validate.Answer(valid: false, reason: .expired, coupon: nil, eligibleProductIds: ["pro"])
        let response = try Coupons.Validate.Response(answer)
        let reply = ReplyEnvelope(v: 1, id: "r1", body: response, error: nil)
        let wire = try JSONEncoder.wire().encode(answer)

        let framed = try JSONEncoder.busFrames(reply)
        #expect(framed.count == 2)
        #expect(framed[1] == wire)
        let back = try JSONDecoder.busFrames(ReplyEnvelope<Coupons.Validate.Response>.self, from: framed)
        #expect(back.body?.reason == .expired)
        #expect(back.body?.answer.bytes == wire)

        // Inline: the fields of the answer itself, as an earlier gateway decodes them...
        let inline = try JSONEncoder.bus.encode(reply)
        let old = try #require(try JSONSerialization.jsonObject(with: inline) as? [String: Any])
        let body = try #require(old["body"] as? [String: Any])
        #expect(body["valid"] as? Bool == false)
        #expect(body["reason"] as? String == "expired")
        #expect(body["eligibleProductIds"] as? [String] == ["pro"])
        #expect(body["answer"] == nil)
        // ...and what an earlier coupons sends reads as the same answer.
        let fromOld = try JSONDecoder.busFrames(ReplyEnvelope<Coupons.Validate.Response>.self, from: [inline])
        #expect(fromOld.body?.reason == .expired)
        #expect(fromOld.body?.answer.bytes == wire)
    }

    /// Answers of a batch that share one body (validations of one code, mostly) carry it once;
    /// each item still reads its own answer, and a different body gets a frame of its own.
    @Test func aBatchCarriesEachDistinctBodyOnce() throws {
        let valid = try Coupons.Validate.Response(.init(valid: true, reason: nil, coupon: nil, eligibleProductIds: ["pro"]))
        let refused = try Coupons.Validate.Response(.init(valid: false, reason: .alreadyRedeemed, coupon: nil, eligibleProductIds: ["pro"]))
        let items = [valid, valid, refused, valid, refused]
        let reply = ReplyEnvelope(v: 1, id: "r1", body: Coupons.ValidateMany.Response(answers: items), error: nil)
        let framed = try JSONEncoder.busFrames(reply)
        #expect(framed.count == 3, "the envelope and two distinct answers")
        let back = try JSONDecoder.busFrames(ReplyEnvelope<Coupons.ValidateMany.Response>.self, from: framed)
        #expect(back.body?.answers.map(\.reason) == items.map(\.reason))
        #expect(back.body?.answers.map(\.answer.bytes) == items.map(\.answer.bytes))
    }
}
