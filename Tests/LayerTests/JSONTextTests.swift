import Foundation
import Testing

@testable import Core

/// `TextJSONEncoder` must write exactly what Foundation's `JSONEncoder` writes with the same
/// options: every value here is encoded by both and the bytes compared.
@Suite struct JSONTextTests {
    /// Plain Foundation encoders with the options `JSONEncoder.wire()` and `.bus` give their own
    /// Foundation side (`JSONText.configure`: keys sorted for both).
    static let foundationWire = foundation(dates: .text, escapeSlashes: false)
    static let foundationBus = foundation(dates: .milliseconds, escapeSlashes: true)

    static func foundation(dates: JSONText.Dates, escapeSlashes: Bool) -> JSONEncoder {
        let e = JSONEncoder()
        JSONText.configure(e, dates: dates, escapeSlashes: escapeSlashes)
        return e
    }

    func same<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let wire = try #require(
            JSONText.encode(value, dates: .text, escapeSlashes: false), sourceLocation: sourceLocation)
        #expect(
            String(decoding: wire, as: UTF8.self)
                == String(decoding: try Self.foundationWire.encode(value), as: UTF8.self),
            sourceLocation: sourceLocation)
        let bus = try #require(
            JSONText.encode(value, dates: .milliseconds, escapeSlashes: true), sourceLocation: sourceLocation)
        #expect(
            String(decoding: bus, as: UTF8.self)
                == String(decoding: try Self.foundationBus.encode(value), as: UTF8.self),
            sourceLocation: sourceLocation)
    }

    enum Kind: String, Codable { case alpha, beta }
    enum Shape: Codable { case circle(radius: Double), square(Int, label: String?), none }
    struct Empty: Codable {}

    struct Everything: Codable {
        var s = "plain"
        var i = -42, i8: Int8 = -8, i16: Int16 = 16, i32: Int32 = -32, i64 = Int64.min
        var u: UInt = 7, u8: UInt8 = 255, u16: UInt16 = 16, u32: UInt32 = 32, u64 = UInt64.max
        var d = 0.1, f: Float = 1.5, whole = 100.0, b = true
        var absent: String? = nil
        var present: Int? = 3
        var date = Date(timeIntervalSince1970: 1_733_400_000.123)
        var data = Data([0, 1, 2, 250, 255])
        var url = URL(string: "https://example.com/a/b?c=d&e=f")!
        var id = UUID(uuidString: "6F1C1F6E-6A43-4D2B-9D0E-3B1D2F1A9C01")!
        var kind = Kind.beta
        var shapes: [Shape] = [.circle(radius: 2.5), .square(3, label: nil), .square(4, label: "x/y"), .none]
        var nested: [String: [Int]] = ["b": [1, 2], "a": [], "B": [3]]
        var byNumber: [Int: String] = [10: "ten", 2: "two", -1: "minus"]
        var matrix: [[Double]] = [[1, 2.25], [], [-0.0]]
        var empty = Empty()
        var emptyList: [Int] = []
        var dates: [Date?] = [nil, Date(timeIntervalSince1970: 0)]
    }

    @Test func everyKindOfValueIsWrittenAsFoundationWritesIt() throws {
        try same(Everything())
        try same([Everything(), Everything()])
    }

    @Test func topLevelFragmentsAndNulls() throws {
        try same("text/with/slashes")
        try same(12)
        try same(Optional<Int>.none)
        try same([Optional<String>.none, "a"])
        try same(Empty())
    }

    /// Keys in an order where bytes, case and numbers disagree; a key set twice keeps its last value.
    struct Keys: Encodable {
        enum K: String, CodingKey { case a10, a2, a1, B, a, _x, Z, é, aB = "a_b", z, dup }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            for k in [K.a10, .a2, .a1, .B, .a, ._x, .Z, .é, .aB, .z] { try c.encode(k.stringValue, forKey: k) }
            try c.encode(1, forKey: .dup)
            try c.encode("second", forKey: .dup)
            try c.encodeNil(forKey: .z)
        }
    }

    /// Nested containers, super encoders and a container asked for twice.
    struct Containers: Encodable {
        enum K: String, CodingKey { case inner, list, sup, plain }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            var inner = c.nestedContainer(keyedBy: K.self, forKey: .inner)
            try inner.encode(true, forKey: .plain)
            var list = c.nestedUnkeyedContainer(forKey: .list)
            try list.encode(1)
            var deeper = list.nestedContainer(keyedBy: K.self)
            try deeper.encode("d", forKey: .plain)
            var deepList = list.nestedUnkeyedContainer()
            try deepList.encodeNil()
            try Kind.alpha.encode(to: list.superEncoder())
            try "s".encode(to: c.superEncoder(forKey: .sup))
            try 5.encode(to: c.superEncoder())
            var again = encoder.container(keyedBy: K.self)
            try again.encode("later", forKey: .plain)
        }
    }

    /// Writes where it sits, as its encoder's `codingPath` names it.
    struct PathEcho: Encodable {
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(
                encoder.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: "."))
        }
    }

    struct Paths: Encodable {
        var here = PathEcho()
        var list = [PathEcho(), PathEcho()]
        var nested = ["inner": [PathEcho()]]
        var optional: PathEcho? = PathEcho()
    }

    /// An object past the keys sorted by insertion (32): keys sharing their first eight bytes, a
    /// key set twice, and set again after a later one.
    struct ManyKeys: Encodable {
        struct K: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(_ s: String) { stringValue = s }
            init?(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        let keys: [String]
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            for (i, k) in keys.enumerated() { try c.encode(i, forKey: K(k)) }
        }
    }

    @Test func objectsOfEverySizeAreSortedAndKeepTheLastOfAKeySetTwice() throws {
        var random = SystemRandomNumberGenerator()
        let alphabet = Array("aAbB_-1é/".unicodeScalars)
        for count in [0, 1, 2, 3, 10, 29, 30, 33, 40, 200] {
            var keys = (0..<count).map { _ in
                // Long shared beginnings: the first eight bytes often tie.
                let tail = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                    alphabet.randomElement(using: &random)!
                }
                return "prefixed" + String(String.UnicodeScalarView(tail))
            }
            if count > 2 { keys += [keys[0], keys[count / 2], keys[0]] }
            try same(ManyKeys(keys: keys))
            try same(Dictionary(keys.enumerated().map { ($1, $0) }, uniquingKeysWith: max))
        }
    }

    @Test func keysAreSortedByTheirBytesAndNestedContainersKeepTheirPlace() throws {
        try same(Keys())
        try same(Containers())
        try same(Paths())
    }

    @Test func everyControlCharacterAndEscapeAndAnyUnicode() throws {
        let ascii = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
        try same([ascii, "\"quoted\" \\ back / slash", "é, 漢字, 👩‍👩‍👧, e\u{301}", ""])
        var random = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let scalars = (0..<Int.random(in: 0...12, using: &random)).compactMap { _ in
                Unicode.Scalar(UInt32.random(in: 0...(Bool.random(using: &random) ? 0x7F : 0x10FFFF), using: &random))
            }
            try same(["k\(scalars.count)": String(String.UnicodeScalarView(scalars))])
        }
    }

    @Test func numbersAsFoundationFormatsThem() throws {
        try same([
            0.1, 1e20, 1e-7, -0.0, 100.0, 1e16, 123_456_789.125, .greatestFiniteMagnitude, .leastNonzeroMagnitude,
            -2.5e-300
        ])
        try same([Float(0.1), 3.4e38, -1e-10, 16_777_216])
        var random = SystemRandomNumberGenerator()
        var doubles: [Double] = []
        while doubles.count < 500 {
            let d = Double(bitPattern: random.next())
            if d.isFinite { doubles.append(d) }
        }
        try same(doubles)
        try same((0..<200).map { _ in Int64(bitPattern: random.next()) })
    }

    @Test func whatFoundationRefusesOrWritesItselfGoesToFoundation() throws {
        // Not finite: Foundation's error, with its message.
        #expect(JSONText.encode(Double.nan, dates: .text, escapeSlashes: false) == nil)
        #expect(throws: EncodingError.self) { try JSONEncoder.wire().encode(["x": Double.infinity]) }
        // A top-level value that encodes nothing: Foundation refuses it.
        struct Nothing: Encodable { func encode(to encoder: any Encoder) throws {} }
        #expect(JSONText.encode(Nothing(), dates: .text, escapeSlashes: false) == nil)
        #expect(throws: EncodingError.self) { try JSONEncoder.wire().encode(Nothing()) }
        // A Decimal: Foundation writes it.
        #expect(JSONText.encode([Decimal(string: "1.25")!], dates: .text, escapeSlashes: false) == nil)
        #expect(
            try JSONEncoder.wire().encode([Decimal(string: "1.25")!])
                == (try Self.foundationWire.encode([Decimal(string: "1.25")!])))
    }

    /// What a type that writes its own text writes, through `writeJSON` alone.
    func ownText(_ value: some JSONTextWriting, dates: JSONText.Dates, escapeSlashes: Bool) throws -> String {
        var object = JSONText.Object(dates: dates, escapeSlashes: escapeSlashes)
        try value.writeJSON(&object)
        return String(decoding: object.finished(), as: UTF8.self)
    }

    /// `writeJSON` writes what `Codable` writes, with both encoders' options.
    func writesAsCodable(
        _ value: some JSONTextWriting, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for (dates, slashes, foundation) in [
            (JSONText.Dates.text, false, Self.foundationWire), (.milliseconds, true, Self.foundationBus),
        ] {
            #expect(
                try ownText(value, dates: dates, escapeSlashes: slashes)
                    == String(decoding: try foundation.encode(value), as: UTF8.self),
                sourceLocation: sourceLocation)
        }
    }

    /// The names of `value`'s stored properties that hold nil, nested values' included.
    func unset(_ value: Any, path: String = "") -> [String] {
        Mirror(reflecting: value).children.flatMap { child -> [String] in
            let name = path + (child.label ?? "?")
            let inner = Mirror(reflecting: child.value)
            if inner.displayStyle == .optional {
                guard let some = inner.children.first else { return [name] }
                return unset(some.value, path: name + ".")
            }
            return inner.displayStyle == .struct ? unset(child.value, path: name + ".") : []
        }
    }

    @Test func theMessagesThatWriteTheirOwnTextWriteWhatCodableWrites() throws {
        let at = Date(timeIntervalSince1970: 1_733_400_000.125)
        let money = Money(amount: "4.99", currency: "EUR")
        let coupon = PublicCoupon(
            code: "SPRING/25 \"é\"", kind: .percentOff, percentOff: 20, amountOff: money,
            duration: .init(unit: "month", count: 3), periodCount: 2, entitlementId: "pro")
        var full = RedemptionView(
            redemptionId: UUID(), code: "SPRING-25", status: .completed, platform: .android, productId: "pro/year",
            pricePaid: money, sandbox: true, reservedAt: at, completedAt: Date(timeIntervalSince1970: 1_733_500_000.5),
            failureReason: "a \"reason\"\n", entitlement: .init(entitlementId: "pro", expiresAt: .distantFuture),
            accountId: UUID(), appUserId: "app/user",
            appStore: AppStoreHandoff(
                redemptionUrl: "https://apps.apple.com/redeem?ctx=offercodes&code=X", appAccountToken: UUID(),
                redemptionUrls: ["pro": "https://a/1", "Pro": "https://a/2"]))
        full.playStore = PlayStoreHandoff(offerId: "o-1", offerTags: ["redeem-coupon", "b"], obfuscatedAccountId: "x")
        full.uniqueCodeLast4 = "Z9Q2"
        full.stripe = StripeHandoff(checkoutUrl: "https://checkout.stripe.com/c/pay/cs_test")
        #expect(unset(full) == [], "a field the test leaves out is a field it does not check")
        let bare = RedemptionView(
            redemptionId: UUID(), code: "FREE", status: .granting, platform: .web, productId: nil, pricePaid: nil,
            sandbox: false, reservedAt: at, completedAt: nil, failureReason: nil, entitlement: nil, accountId: nil,
            appUserId: nil)
        try writesAsCodable(full)
        try writesAsCodable(bare)

        var command = GrantCommand(
            redemptionId: UUID(), accountId: UUID(), appUserId: "u/1", entitlementId: "pro",
            duration: .init(unit: "week", count: -2), sandbox: true, coupon: coupon, platform: .ios,
            productId: "pro", reservedAt: at, mode: .test, app: UUID())
        #expect(unset(command) == [])
        let envelope = Envelope(
            id: "e/1", type: GrantCommand.type, requestId: "r-1", traceparent: "00-a-b-01", deadlineMs: -5,
            frames: false, body: command)
        #expect(unset(envelope) == [])
        try writesAsCodable(envelope)
        command.productId = nil
        command.mode = nil
        command.app = nil
        command.coupon = PublicCoupon(
            code: "FREE", kind: .freePeriod, percentOff: nil, amountOff: nil, duration: .init(unit: "day", count: 0),
            periodCount: nil, entitlementId: nil)
        try writesAsCodable(Envelope(id: "e", type: "t", requestId: nil, traceparent: nil, body: command))
        // An array of them is written as one.
        let two: [Envelope<GrantCommand>] = [envelope, Envelope(id: "2", type: "t", requestId: nil, body: command)]
        for list in [two, []] {
            #expect(
                list.writeJSON(dates: .milliseconds, escapeSlashes: true) == (try Self.foundationBus.encode(list)))
        }
        // The shared encoders take the written text, and a date they cannot write goes to Codable.
        #expect(try JSONEncoder.bus.encode(envelope) == Self.foundationBus.encode(envelope))
        let never = RedemptionView(
            redemptionId: UUID(), code: "X", status: .reserved, platform: .web, productId: nil, pricePaid: nil,
            sandbox: false, reservedAt: Date(timeIntervalSince1970: .infinity), completedAt: nil, failureReason: nil,
            entitlement: nil, accountId: nil, appUserId: nil)
        #expect(throws: (any Error).self) { try ownText(never, dates: .milliseconds, escapeSlashes: true) }
        #expect(throws: EncodingError.self) { try JSONEncoder.bus.encode(never) }
    }

    @Test func theSharedEncodersWriteTheSameBytesAsFoundation() throws {
        let view = RedemptionView(
            redemptionId: UUID(), code: "SPRING-25", status: .completed, platform: .ios, productId: nil, pricePaid: nil,
            sandbox: false, reservedAt: Date(timeIntervalSince1970: 1_733_400_000.125), completedAt: Date(),
            failureReason: "a \"reason\"\n", entitlement: .init(entitlementId: "pro", expiresAt: Date()),
            accountId: UUID(),
            appUserId: "app/user")
        #expect(try JSONEncoder.wire() is TextJSONEncoder && JSONEncoder.bus is TextJSONEncoder)
        #expect(try JSONEncoder.wire().encode(view) == Self.foundationWire.encode(view))
        #expect(try JSONEncoder.bus.encode(view) == Self.foundationBus.encode(view))
        let envelope = Envelope(id: "e-1", type: "coupons.test", body: view)
        #expect(try JSONEncoder.bus.encode(envelope) == Self.foundationBus.encode(envelope))
    }
}
