import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Bus
@testable import Core
@testable import Telemetry

/// The bus's binary format (`BusBinary`): every value it carries comes back as it was sent, a
/// reader of one version reads a writer of another, and the two formats share one bus.
@Suite struct BusBinaryTests {
    let logger = Logger(service: "test", sink: LogSink(capturing: ()))
    let bus = BusNode(BusOptions(security: .plain), logger: Logger(service: "test", sink: LogSink(capturing: ())))
    static let at = Date(timeIntervalSince1970: 1_764_483_573.123_456)
    /// A time the public JSON holds exactly (milliseconds, an exact binary fraction).
    static let shownAt = Date(timeIntervalSince1970: 1_764_483_573.125)
    static let account = UUID(uuidString: "6F1C2B1E-8A44-4C1B-9D2E-0A3B4C5D6E7F")!

    /// JSON of a value with sorted keys: two values of a type are the same when these are.
    func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder.makeBus()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Encodes binary, checks the frame's first byte, decodes, and checks nothing changed.
    @discardableResult
    func roundTrip<T: Codable>(_ value: T) throws -> T {
        let data = try BusBinary.encode(value)
        #expect(data.first == BusBinary.marker)
        let back = try BusBinary.decode(T.self, from: data)
        #expect(try json(back) == json(value))
        return back
    }

    static let view = RedemptionView(
        redemptionId: UUID(uuidString: "0B9B3D3C-7E61-4E8A-8F19-2C1D0E5A4B3C")!, code: "SPRING-ÉTÉ 🌸",
        status: .reserved,
        platform: .android, productId: "pro", pricePaid: Money(amount: "9.99", currency: "EUR"), sandbox: false,
        reservedAt: shownAt, completedAt: nil, failureReason: nil,
        entitlement: .init(entitlementId: "premium", expiresAt: shownAt.addingTimeInterval(86_400)), accountId: account,
        appUserId: "user-1")

    static let redeem = Coupons.Redeem(
        accountId: account, appUserId: "user-1", code: "SPRING", productId: nil, platform: .web, sandbox: true,
        playOwned: ["a", ""], traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")

    // MARK: Round trips

    @Test func theHotRequestsComeBackAsTheyWereSent() throws {
        let envelope = Envelope(
            id: "c0ffee-1", type: Coupons.RedeemMany.type, requestId: "req-1", traceparent: nil,
            deadlineMs: 1_764_483_573_123, frames: true, body: Coupons.RedeemMany(items: [Self.redeem, Self.redeem]))
        let back = try roundTrip(envelope)
        #expect(back.body.items[0].accountId == Self.account && back.body.items[0].playOwned == ["a", ""])
        #expect(back.body.items[1].productId == nil && back.body.items[1].platform == .web)
        #expect(back.deadlineMs == 1_764_483_573_123 && back.frames == true && back.traceparent == nil)

        let validate = Coupons.Validate(
            accountId: Self.account, code: "x", platform: nil, sandbox: false, playOwned: nil, productId: "p")
        try roundTrip(Envelope(id: "2", type: Coupons.ValidateMany.type, body: Coupons.ValidateMany(items: [validate])))
        let complete = Coupons.CompleteMany(items: [
            .init(redemptionId: Self.view.redemptionId, entitlement: .init(entitlementId: "e", expiresAt: Self.at))
        ])
        #expect(try roundTrip(complete).items[0].entitlement.expiresAt == Self.at)  // to the bit, not to the ms
        try roundTrip(Coupons.CompleteMany.Response(completedAt: ["a": Self.at, "b": .distantPast]))
        try roundTrip(Coupons.CompleteMany.Response(completedAt: nil))
        try roundTrip(SessionRevoked(sessionId: Self.account, until: Self.at))
        try roundTrip(Envelope(id: "3", type: Ping.type, body: Ping()))
        try roundTrip(ServiceError(.rateLimited, "slow down", field: "code", retryAfter: 3))
    }

    /// Replies carry their `WireJSON` values as frames of their own: the bytes the gateway sends.
    @Test func theHotRepliesCarryTheirViewsAsTheBytesTheGatewaySends() throws {
        let answers: [BatchAnswer<Coupons.Redeem.Response>] = [
            BatchAnswer(.success(try Coupons.Redeem.Response(redemption: Self.view, created: true))),
            BatchAnswer(.failure(ServiceError(.codeInUse, "used", field: "code"))),
            BatchAnswer(.success(try Coupons.Redeem.Response(redemption: nil, created: false, refusal: .exhausted))),
            BatchAnswer(.failure(CancellationError()))
        ]
        let reply = ReplyEnvelope(v: 1, id: "r1", body: Coupons.RedeemMany.Response(answers: answers), error: nil)
        let frames = try BusCoding.encodeFrames(reply)
        #expect(frames.count == 2 && frames[0].first == BusBinary.marker)
        #expect(frames[1] == (try JSONEncoder.wire().encode(Self.view)))
        let back = try BusCoding.decodeFrames(ReplyEnvelope<Coupons.RedeemMany.Response>.self, from: frames)
        let got = try #require(back.body?.answers)
        #expect(got.count == 4 && back.id == "r1" && back.error == nil)
        #expect(try got[0].value?.redemption?.decoded() == Self.view)
        #expect(got[0].value?.redemption?.bytes == frames[1] && got[0].value?.created == true)
        #expect(got[1].error == ServiceError(.codeInUse, "used", field: "code"))
        #expect(got[2].value?.redemption == nil && got[2].value?.refusal == .exhausted)
        #expect(got[3].error == .internal)

        let answer = Coupons.Validate.Answer(
            valid: false, reason: .notEligible, coupon: nil, eligibleProductIds: [], basePlanIds: ["p": ["b1", "b2"]])
        let one = try Coupons.Validate.Response(answer)
        let validate = ReplyEnvelope(
            v: 1, id: "r2", body: Coupons.ValidateMany.Response(answers: [one, one]), error: nil)
        let validateFrames = try BusCoding.encodeFrames(validate)
        #expect(validateFrames.count == 2)  // one body, however many items point at it
        let validated = try BusCoding.decodeFrames(
            ReplyEnvelope<Coupons.ValidateMany.Response>.self, from: validateFrames)
        #expect(validated.body?.answers.map(\.reason) == [.notEligible, .notEligible])
        #expect(try validated.body?.answers[1].answer.decoded().basePlanIds == ["p": ["b1", "b2"]])

        let refused = ReplyEnvelope<Coupons.Redeem.Response>(
            v: 1, id: "r3", body: nil, error: ServiceError(.notFound, "no such coupon", field: "code"))
        let error = try BusCoding.decodeFrames(
            ReplyEnvelope<Coupons.Redeem.Response>.self, from: try BusCoding.encodeFrames(refused))
        #expect(error.body == nil && error.error == refused.error)
    }

    // MARK: Hot messages written and read by hand

    /// The messages written and read by hand (`BusBinaryFields`), with every optional field both
    /// absent and present: the envelopes of every reservation and validation and their replies.
    static func handWrittenMessages() throws -> [(name: String, value: any Codable & Sendable)] {
        let items = [
            redeem,
            Coupons.Redeem(
                accountId: account, appUserId: "", code: "Ü", productId: "pro", platform: .ios, sandbox: false,
                playOwned: [], traceparent: nil, app: account),
            Coupons.Redeem(
                accountId: account, appUserId: "u", code: "C", productId: nil, platform: .android, sandbox: false,
                playOwned: nil, traceparent: nil, app: nil),
        ]
        let validations = [
            Coupons.Validate(accountId: account, code: "x", platform: nil, sandbox: false),
            Coupons.Validate(
                accountId: account, code: "y", platform: .android, sandbox: true, playOwned: ["a"], productId: "p",
                app: account),
            {
                var old = Coupons.Validate(accountId: account, code: "z", platform: .web)
                old.sandbox = nil  // from a gateway of an earlier version
                return old
            }(),
        ]
        let answers: [BatchAnswer<Coupons.Redeem.Response>] = [
            BatchAnswer(.success(try Coupons.Redeem.Response(redemption: view, created: true))),
            BatchAnswer(.failure(ServiceError(.codeInUse, "used", field: "code", retryAfter: 2))),
            BatchAnswer(.success(try Coupons.Redeem.Response(redemption: nil, created: false, refusal: .exhausted))),
            BatchAnswer(.success(try Coupons.Redeem.Response(redemption: nil, created: false, asksPlayOwnership: true))),
        ]
        let valid = try Coupons.Validate.Response(
            .init(valid: true, reason: nil, coupon: nil, eligibleProductIds: ["pro"]), asksPlayOwnership: true)
        let refused = try Coupons.Validate.Response(
            .init(valid: false, reason: .notEligible, coupon: nil, eligibleProductIds: [], basePlanIds: ["p": ["b"]]))
        return [
            ("full envelope", Envelope(
                id: "c0ffee-1", type: Coupons.RedeemMany.type, requestId: "req-1", traceparent: redeem.traceparent,
                deadlineMs: -5, frames: false, body: Coupons.RedeemMany(items: items))),
            ("bare envelope", Envelope(
                id: "", type: Coupons.ValidateMany.type, requestId: nil, traceparent: nil,
                body: Coupons.ValidateMany(items: validations))),
            ("no items", Envelope(
                id: "2", type: "t", requestId: nil, traceparent: nil, body: Coupons.RedeemMany(items: []))),
            ("single redeem", Envelope(id: "3", type: Coupons.Redeem.type, requestId: "r", body: redeem)),
            ("empty body", Envelope(id: "4", type: Ping.type, requestId: nil, traceparent: nil, body: Ping())),
            ("other body", Envelope(
                id: "5", type: SessionRevoked.topic, requestId: nil, traceparent: nil,
                body: SessionRevoked(sessionId: account, until: at))),
            ("redeem answers", ReplyEnvelope(
                v: 1, id: "r1", body: Coupons.RedeemMany.Response(answers: answers), error: nil)),
            ("validate answers", ReplyEnvelope(
                v: 1, id: "r2", body: Coupons.ValidateMany.Response(answers: [valid, refused, valid]), error: nil)),
            ("error", ReplyEnvelope<Coupons.RedeemMany.Response>(
                v: 1, id: "r3", body: nil, error: ServiceError(.notFound, "no such coupon", field: "code"))),
            ("grant command", Envelope(
                id: "6", type: GrantCommand.type, requestId: "q", traceparent: nil,
                body: GrantCommand(
                    redemptionId: view.redemptionId, accountId: account, appUserId: "u", entitlementId: "pro",
                    duration: .init(unit: "month", count: 1), sandbox: false,
                    coupon: PublicCoupon(
                        code: "FREE", kind: .freePeriod, percentOff: nil, amountOff: nil,
                        duration: .init(unit: "week", count: -2), periodCount: nil, entitlementId: nil),
                    platform: .ios, productId: nil, reservedAt: at, mode: .test, app: nil))),
            ("grant command, every field", Envelope(
                id: "7", type: GrantCommand.type, requestId: nil, traceparent: nil,
                body: GrantCommand(
                    redemptionId: view.redemptionId, accountId: account, appUserId: "", entitlementId: "e",
                    duration: .init(unit: "day", count: 3), sandbox: true,
                    coupon: PublicCoupon(
                        code: "OFF", kind: .amountOff, percentOff: 20,
                        amountOff: Money(amount: "1.50", currency: "EUR"),
                        duration: .init(unit: "month", count: 12), periodCount: 3, entitlementId: "premium"),
                    platform: .web, productId: "pro", reservedAt: .distantPast, mode: .live, app: account))),
            ("completions", Envelope(
                id: "8", type: Coupons.CompleteMany.type, requestId: nil, traceparent: nil,
                body: Coupons.CompleteMany(items: [
                    .init(redemptionId: view.redemptionId, entitlement: .init(entitlementId: "e", expiresAt: at)),
                    .init(redemptionId: account, entitlement: .init(entitlementId: "", expiresAt: .distantFuture)),
                ]))),
            ("completed", ReplyEnvelope(
                v: 1, id: "r5",
                body: Coupons.CompleteMany.Response(completedAt: ["a": at, "b": .distantPast, "": at]), error: nil)),
            ("completed by an earlier version", ReplyEnvelope(
                v: 1, id: "r6", body: Coupons.CompleteMany.Response(completedAt: nil), error: nil)),
            ("answer", ReplyEnvelope(
                v: 1, id: "r4", body: try Coupons.Redeem.Response(redemption: view, created: false), error: nil)),
        ]
    }

    /// Writes `value` by hand or through `Codable`, with or without frames: the frames of the message.
    func frames<T: Encodable>(_ value: T, byHand: Bool, framed: Bool) throws -> [Data] {
        let frames = BusFrames()
        let envelope = try BusBinary.encode(value, userInfo: framed ? [BusFrames.key: frames] : [:], byHand: byHand)
        return [envelope] + frames.all
    }

    /// Each is written by hand byte for byte as its `Codable` conformance writes it, to a caller
    /// that reads frames and to one that does not, and read back the `Codable` way, as earlier
    /// versions read it.
    @Test func theHotMessagesAreWrittenByHandAsCodableWritesThem() throws {
        for (name, value) in try Self.handWrittenMessages() {
            #expect(value is any BusBinaryFields, "\(name)")
            for framed in [true, false] {
                func check<T: Codable>(_ value: T) throws {
                    let byHand = try frames(value, byHand: true, framed: framed)
                    #expect(byHand == (try frames(value, byHand: false, framed: framed)), "\(name), framed: \(framed)")
                    let userInfo: [CodingUserInfoKey: Any] = [BusFrames.key: BusFrames(Array(byHand.dropFirst()))]
                    let read = try BusBinary.decode(T.self, from: byHand[0], userInfo: userInfo, byHand: false)
                    #expect(try json(read) == json(value), "\(name), framed: \(framed)")
                }
                try check(value)
            }
        }
    }

    /// Each is read by hand into what `Codable` reads from the same frames.
    @Test func theHotMessagesAreReadByHandAsCodableReadsThem() throws {
        for (name, value) in try Self.handWrittenMessages() {
            for framed in [true, false] {
                func check<T: Codable>(_ value: T) throws {
                    let frames = try frames(value, byHand: false, framed: framed)
                    let userInfo: [CodingUserInfoKey: Any] = [BusFrames.key: BusFrames(Array(frames.dropFirst()))]
                    let viaCodable = try BusBinary.decode(T.self, from: frames[0], userInfo: userInfo, byHand: false)
                    let reader = BusBinaryReader(bytes: [UInt8](frames[0]), userInfo: userInfo)
                    let own = try (T.self as! any BusBinaryFields.Type).init(binary: reader, at: 1)
                    #expect(try json(own as! T) == json(viaCodable), "\(name), framed: \(framed)")
                    #expect(try json(own as! T) == json(value), "\(name), framed: \(framed)")
                    let decoded = try BusBinary.decode(T.self, from: frames[0], userInfo: userInfo)
                    #expect(try json(decoded) == json(value), "\(name), framed: \(framed)")
                }
                // A validation's answer without frames comes inline, read through `Codable` only.
                if !framed, name == "validate answers" { continue }
                try check(value)
            }
        }
        // A router reads the header and the body of a request envelope by hand.
        let envelope = Envelope(
            id: "e9", type: Coupons.RedeemMany.type, requestId: "req-9", traceparent: Self.redeem.traceparent,
            deadlineMs: 7, frames: true, body: Coupons.RedeemMany(items: [Self.redeem]))
        let read = try #require(BusBinaryEnvelope(try BusBinary.encode(envelope)))
        #expect(read.header.id == "e9" && read.header.type == Coupons.RedeemMany.type && read.header.v == 1)
        #expect(read.header.requestId == "req-9" && read.header.deadlineMs == 7 && read.header.frames == true)
        #expect(read.header.traceparent == Self.redeem.traceparent)
        #expect(try json(try #require(read.body(as: Coupons.RedeemMany.self))) == json(envelope.body))
        #expect(read.body(as: Coupons.RedeemMany.Response.self) == nil)
    }

    /// By hand as through `Codable`: fields in any order, explicit nulls, and fields of a later
    /// version stepped over.
    @Test func aHandWrittenReaderFindsFieldsByNameAndStepsOverOthers() throws {
        struct Later: Encodable {
            enum CodingKeys: String, CodingKey {
                case app, added, traceparent, playOwned, sandbox, platform, productId, code, appUserId, accountId, tail
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encodeNil(forKey: .app)
                try c.encode(["x": [1, 2]], forKey: .added)
                try c.encodeNil(forKey: .traceparent)
                try c.encode(["p"], forKey: .playOwned)
                try c.encode(true, forKey: .sandbox)
                try c.encode("android", forKey: .platform)
                try c.encodeNil(forKey: .productId)
                try c.encode("B", forKey: .code)
                try c.encode("u", forKey: .appUserId)
                try c.encode(BusBinaryTests.account.uuidString, forKey: .accountId)  // a UUID as text reads too
                try c.encode(BusBinaryTests.at, forKey: .tail)
            }
        }
        let bytes = [UInt8](try BusBinary.encode(Later()))
        let own = try Coupons.Redeem(binary: BusBinaryReader(bytes: bytes, userInfo: [:]), at: 1)
        let viaCodable = try BusBinary.decode(Coupons.Redeem.self, from: Data(bytes), userInfo: [:], byHand: false)
        #expect(try json(own) == json(viaCodable))
        #expect(own.accountId == Self.account && own.platform == .android && own.playOwned == ["p"])
        #expect(own.app == nil && own.productId == nil && own.traceparent == nil && own.sandbox)

        // What the hand-written reader refuses, the Codable reader is asked, and its error stands.
        struct NoPlatform: Encodable {
            var accountId = BusBinaryTests.account, appUserId = "u", code = "C", sandbox = true
        }
        let bad = [UInt8](try BusBinary.encode(NoPlatform()))
        #expect(throws: DecodingError.self) {
            try Coupons.Redeem(binary: BusBinaryReader(bytes: bad, userInfo: [:]), at: 1)
        }
        let missing = #expect(throws: DecodingError.self) { try BusBinary.decode(Coupons.Redeem.self, from: Data(bad)) }
        guard case .keyNotFound(let key, _)? = missing else {
            Issue.record("expected keyNotFound, got \(String(describing: missing))")
            return
        }
        #expect(key.stringValue == "platform")
    }

    enum Tier: Int, Codable { case free = 0, pro = 7 }
    enum Change: Codable, Equatable {
        case none
        case moved(from: String, to: String?)
        case counted(Int)
    }
    struct Inner: Codable, Equatable {
        var name: String
        var note: String?
        var deeper: [Inner]?
    }
    struct Everything: Codable, Equatable {
        var text = ""
        var unicode = "naïve 日本 🚀 \u{0} \"quoted\" \\"
        var ints: [Int64] = [0, 1, -1, .max, .min, 300, -300]
        var unsigned: [UInt64] = [0, .max, 128]
        var small: [Int8] = [.min, .max]
        var halves: [UInt16] = [.max]
        var doubles: [Double] = [0, -0.5, .pi, 1e300, -.infinity, .leastNonzeroMagnitude]
        var float: Float = 1.5
        var flags: [Bool] = [true, false]
        var at = BusBinaryTests.at
        var dates: [Date] = [.distantPast, .distantFuture, Date(timeIntervalSince1970: 0)]
        var id = BusBinaryTests.account
        var ids: [UUID?] = [nil, BusBinaryTests.account]
        var price = Decimal(string: "1234.5678")!
        var bytes = Data([0, 255, 7])
        var url = URL(string: "https://example.com/a?b=c")!
        var nothing: String? = nil
        var something: String? = "here"
        var nested: Inner? = Inner(name: "a", note: nil, deeper: [Inner(name: "b", note: "n", deeper: [])])
        var optionals: [Int?] = [1, nil, 3]
        var nestedArrays: [[String]] = [[], ["a"], ["b", "c"]]
        var byName: [String: [Int]] = ["one": [1], "": [], "two": [2, 2]]
        var byNumber: [Int: String] = [1: "a", -2: "b"]
        var byId: [UUID: Int] = [BusBinaryTests.account: 1]
        var tier = Tier.pro
        var tiers: [Tier] = [.free, .pro]
        var status = RedemptionStatus.completed
        var changes: [Change] = [.none, .moved(from: "a", to: nil), .counted(-4)]
        var json: JSONValue = .object(["a": .array([.number(1), .number(2.5), .null, .bool(true), .string("s")])])
        var empty = Empty()
    }

    @Test func everyKindOfValueComesBackAsItWasWritten() throws {
        let value = Everything()
        let back = try BusBinary.decode(Everything.self, from: try BusBinary.encode(value))
        #expect(back == value)
        #expect(back.doubles[2].bitPattern == Double.pi.bitPattern && back.at == Self.at)
    }

    // MARK: Versions

    /// What a message was.
    struct RedeemV1: Codable, Equatable {
        var accountId: UUID
        var code: String
        var sandbox: Bool
        var playOwned: [String]?
    }

    /// The same message in a later version: fields added before, between and after, of every kind.
    struct RedeemV2: Codable, Equatable {
        var added: [String: [Inner]]?
        var accountId: UUID
        var count: Int
        var code: String
        var inner: Inner?
        var sandbox: Bool
        var playOwned: [String]?
        var at: Date?
        var price: Decimal?
        var tail: [Int]?
    }

    @Test func aReaderOfAnEarlierVersionStepsOverFieldsItDoesNotKnow() throws {
        let later = RedeemV2(
            added: ["x": [Inner(name: "i", note: "n", deeper: nil)]], accountId: Self.account, count: -9, code: "C",
            inner: Inner(name: "j", note: nil, deeper: []), sandbox: true, playOwned: ["p"], at: Self.at,
            price: Decimal(7), tail: [1, 2])
        let read = try BusBinary.decode(RedeemV1.self, from: try BusBinary.encode(later))
        #expect(read == RedeemV1(accountId: Self.account, code: "C", sandbox: true, playOwned: ["p"]))
        // In an envelope, as a router of an earlier version reads it.
        let envelope = try BusBinary.encode(Envelope(id: "1", type: "t", body: later))
        #expect(try BusBinary.decode(Envelope<RedeemV1>.self, from: envelope).body.code == "C")
    }

    @Test func aReaderOfALaterVersionReadsAbsentOptionalFieldsAsNil() throws {
        struct V2: Codable, Equatable {
            var accountId: UUID
            var code: String
            var sandbox: Bool
            var playOwned: [String]?
            var added: Inner?
            var flag: Bool = false
            enum CodingKeys: String, CodingKey { case accountId, code, sandbox, playOwned, added, flag }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                accountId = try c.decode(UUID.self, forKey: .accountId)
                code = try c.decode(String.self, forKey: .code)
                sandbox = try c.decode(Bool.self, forKey: .sandbox)
                playOwned = try c.decodeIfPresent([String].self, forKey: .playOwned)
                added = try c.decodeIfPresent(Inner.self, forKey: .added)
                flag = try c.decodeIfPresent(Bool.self, forKey: .flag) ?? false
            }
        }
        let earlier = RedeemV1(accountId: Self.account, code: "C", sandbox: false, playOwned: nil)
        let read = try BusBinary.decode(V2.self, from: try BusBinary.encode(earlier))
        #expect(read.accountId == Self.account && read.code == "C" && !read.sandbox)
        #expect(read.playOwned == nil && read.added == nil && read.flag == false)
        // A required field that is absent is named, as JSON's decoder names it.
        let missing = #expect(throws: DecodingError.self) {
            try BusBinary.decode(RedeemV2.self, from: try BusBinary.encode(earlier))
        }
        guard case .keyNotFound(let key, _)? = missing else {
            Issue.record("expected keyNotFound, got \(String(describing: missing))")
            return
        }
        #expect(key.stringValue == "count")
    }

    @Test func fieldsAreFoundInWhateverOrderTheyWereWritten() throws {
        struct Backwards: Encodable {
            enum CodingKeys: String, CodingKey { case accountId, code, sandbox, playOwned }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(["z"], forKey: .playOwned)
                try c.encode(false, forKey: .sandbox)
                try c.encode("B", forKey: .code)
                try c.encode(BusBinaryTests.account, forKey: .accountId)
            }
        }
        let read = try BusBinary.decode(RedeemV1.self, from: try BusBinary.encode(Backwards()))
        #expect(read == RedeemV1(accountId: Self.account, code: "B", sandbox: false, playOwned: ["z"]))
    }

    // MARK: Untrusted bytes

    /// Bytes from the network never trap: every truncation of a real message, and every single
    /// byte changed, either throws or decodes.
    @Test func damagedFramesThrowAndNeverTrap() throws {
        let frame = try BusBinary.encode(Everything())
        for length in 0..<frame.count {
            #expect(throws: (any Error).self) { try BusBinary.decode(Everything.self, from: frame.prefix(length)) }
        }
        var bytes = [UInt8](frame)
        for i in 1..<bytes.count {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                bytes[i] ^= flip
                _ = try? BusBinary.decode(Everything.self, from: Data(bytes))
                bytes[i] ^= flip
            }
        }
        #expect(throws: DecodingError.self) { try BusBinary.decode(Everything.self, from: Data("{}".utf8)) }
    }

    // MARK: Both formats on one bus

    func router() -> BusRouter {
        var router = BusRouter(logger: logger)
        router.on(Coupons.Redeem.self) { request, context in
            #expect(context.requestId == "req-7")
            return try Coupons.Redeem.Response(
                redemption: request.code == "NONE" ? nil : BusBinaryTests.view, created: true)
        }
        return router
    }

    /// A router answers each envelope in the format it came in: binary to binary, and JSON to a
    /// caller of an earlier version, which reads only that.
    @Test func aRouterReadsBothFormatsAndAnswersInTheFormatItWasAsked() async throws {
        let router = router()
        let envelope = Envelope(
            id: "e1", type: Coupons.Redeem.type, requestId: "req-7", frames: true, body: Self.redeem)
        let json = try JSONEncoder.bus.encode(envelope)
        let binary = try BusBinary.encode(envelope)
        #expect(json.first == UInt8(ascii: "{") && binary.first == BusBinary.marker)

        let fromJSON = await router.handle(json)
        let fromBinary = await router.handle(binary)
        #expect(fromJSON[0].first == UInt8(ascii: "{") && fromBinary[0].first == BusBinary.marker)
        #expect(fromJSON.count == 2 && fromBinary.count == 2 && fromJSON[1] == fromBinary[1])
        for frames in [fromJSON, fromBinary] {
            let reply = try BusCoding.decodeFrames(ReplyEnvelope<Coupons.Redeem.Response>.self, from: frames)
            #expect(reply.id == "e1" && reply.error == nil)
            #expect(try reply.body?.redemption?.decoded() == Self.view)
        }
        // A caller of an earlier version does not ask for frames: the view comes inline, in JSON.
        var inline = envelope
        inline.frames = nil
        let old = await router.handle(try JSONEncoder.bus.encode(inline))
        #expect(old.count == 1)
        let oldReply = try JSONDecoder.bus.decode(ReplyEnvelope<Coupons.Redeem.Response>.self, from: old[0])
        #expect(try oldReply.body?.redemption?.decoded() == Self.view)

        // Errors, too, come back in the format of the request, with the field that was missing.
        struct NoCode: Codable { var accountId: UUID }
        let bad = try BusBinary.encode(
            Envelope(id: "e2", type: Coupons.Redeem.type, body: NoCode(accountId: Self.account)))
        let refused = await router.handle(bad)
        #expect(refused[0].first == BusBinary.marker)
        let error = try #require(try BusBinary.decode(ReplyEnvelope<Empty>.self, from: refused[0]).error)
        #expect(error.code == .malformedMessage && error.message.contains("missing body.appUserId"))
        let garbage = await router.handle(Data([BusBinary.marker, 0xFF, 0x00]))
        #expect(try BusCoding.decode(ReplyEnvelope<Empty>.self, from: garbage[0]).error?.code == .malformedMessage)
        let refusedJSON = router.refuse(json, with: .stopping)
        #expect(try JSONDecoder.bus.decode(ReplyEnvelope<Empty>.self, from: refusedJSON[0]).id == "e1")
        #expect(
            try BusBinary.decode(ReplyEnvelope<Empty>.self, from: router.refuse(binary, with: .stopping)[0]).id == "e1")
    }

    @Test func subscribersReadEventsInEitherFormat() throws {
        let event = Envelope(
            id: "ev", type: SessionRevoked.topic, body: SessionRevoked(sessionId: Self.account, until: Self.at))
        for data in [try JSONEncoder.bus.encode(event), try BusBinary.encode(event)] {
            let read = try #require(EventSubscriber.decode(SessionRevoked.self, data, logger: logger))
            #expect(read.body.sessionId == Self.account && abs(read.body.until.timeIntervalSince(Self.at)) < 0.001)
        }
        #expect(EventSubscriber.decode(SessionRevoked.self, Data([BusBinary.marker, 9]), logger: logger) == nil)
    }

    /// A client talks binary to a service of this version, and falls back to JSON for one of an
    /// earlier version (rolling upgrades run both), without its caller noticing.
    @Test func aClientFallsBackToJSONForAServiceOfAnEarlierVersion() async throws {
        let old = try JSONOnlyServer(bus: bus)
        defer { old.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [old.endpoint], defaultTimeout: .seconds(30))
        defer { client.stop() }
        #expect(try await client.request(Echo(text: "a")).text == "a!")
        #expect(old.firstBytes == [BusBinary.marker, UInt8(ascii: "{")])
        #expect(!client.formats.sendsBinary)
        #expect(try await client.request(Echo(text: "b")).text == "b!")
        #expect(old.firstBytes == [BusBinary.marker, UInt8(ascii: "{"), UInt8(ascii: "{")])

        // A service of this version is asked in binary and answers in binary.
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { request, _ in Echo.Response(text: request.text + "?") }
        let server = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { server.stop() }
        let current = try BusClient(bus: bus, service: "test", connect: [server.endpoint], defaultTimeout: .seconds(30))
        defer { current.stop() }
        #expect(try await current.request(Echo(text: "c")).text == "c?")
        #expect(current.formats.sendsBinary)
        let raw = try await current.requestRaw(
            try BusBinary.encode(Envelope(id: "x1", type: Echo.type, body: Echo(text: "d"))), id: "x1",
            timeout: .seconds(30))
        #expect(raw.first == BusBinary.marker)
        #expect(try BusBinary.decode(ReplyEnvelope<Echo.Response>.self, from: raw).body?.text == "d?")
    }
}

/// A bus server of an earlier version, before the binary format: it reads JSON envelopes only and
/// answers anything else `malformedMessage` with no id, as that version's router did.
final class JSONOnlyServer: Sendable {
    private final class Seen: Sendable { let bytes = Mutex<[UInt8]>([]) }
    private let worker: SocketWorker
    private let seen: Seen

    init(bus: BusNode) throws {
        let replies = SocketOutbox()
        let seen = Seen()
        self.seen = seen
        worker = try SocketWorker(
            name: "old-bus-server", outbox: replies,
            onMessage: { frames, _ in
                guard frames.count == 4 else { return }
                let payload = frames[3]
                seen.bytes.withLock { $0.append(payload.first ?? 0) }
                let reply: Data?
                if let request = try? JSONDecoder.bus.decode(Envelope<Echo>.self, from: payload) {
                    reply = try? JSONEncoder.bus.encode(
                        ReplyEnvelope(
                            v: 1, id: request.id, body: Echo.Response(text: request.body.text + "!"), error: nil))
                } else {
                    reply = try? JSONEncoder.bus.encode(
                        ReplyEnvelope<Empty>(v: 1, id: "", body: nil, error: .malformed("not a bus envelope")))
                }
                replies.enqueue(Array(frames[0..<3]) + [reply ?? Data()])
            },
            open: { try SingleSocket(bus.bound(.router, ["tcp://127.0.0.1:*"])) })
    }

    var endpoint: String { worker.endpoint }
    /// The first byte of each request received.
    var firstBytes: [UInt8] { seen.bytes.withLock { $0 } }
    func stop() { worker.stop() }
}
