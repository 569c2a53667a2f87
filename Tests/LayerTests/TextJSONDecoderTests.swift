import Foundation
import Testing

@testable import Core

/// `TextJSONDecoder` must answer what Foundation's `JSONDecoder` answers with the same options:
/// every text here is decoded by both, and the values (or the errors' descriptions) compared. The
/// reader's own path must also be the one taken for the plain bodies it exists for.
@Suite struct TextJSONDecoderTests {
    static let foundation: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { try Timestamp.decodeText(try $0.singleValueContainer()) }
        return d
    }()
    static let text = TextJSONDecoder(dates: .text)

    enum Kind: String, Codable, Equatable { case alpha, beta }

    struct Inner: Codable, Equatable {
        var name: String
        var tags: [String]
    }

    struct Everything: Codable, Equatable {
        var s: String
        var i: Int, i8: Int8, i16: Int16, i32: Int32, i64: Int64
        var u: UInt, u8: UInt8, u16: UInt16, u32: UInt32, u64: UInt64
        var whole: Double
        var b: Bool
        var absent: String?
        var null: Int?
        var present: Int?
        var id: UUID
        var kind: Kind
        var date: Date
        var inner: Inner
        var list: [Inner]
        var byName: [String: Int]
        var matrix: [[Int]]
        var maybe: [Int?]
    }

    static let everything = #"""
        {"s": "a \"quoted\" \\ / \/ \b\f\n\r\t é ☃ \u00e9\u2603 \u0041", "i": -9223372036854775808, "i8": -128,
         "i16": 32767, "i32": -2147483648, "i64": 9223372036854775807, "u": 18446744073709551615, "u8": 255,
         "u16": 0, "u32": 4294967295, "u64": 18446744073709551615, "whole": -123456789012345, "b": false,
         "null": null, "present": 0, "id": "6F1C1F6E-6A43-4D2B-9D0E-3B1D2F1A9C01", "kind": "beta",
         "date": "2026-12-07T03:00:00.123Z", "inner": {"name": "x", "tags": []},
         "list": [{"tags": ["a", "b"], "name": ""}, {"name": "y", "tags": ["\u00e9"]}],
         "byName": {"one": 1, "": 0, "two": -2}, "matrix": [[], [1], [1, 2]], "maybe": [null, 1, null],
         "unknown": {"ignored": [1, 2.5e3, true, null, "x"]}}
        """#

    /// A decoder's answer: the value, or the error's description.
    enum Answer<T: Equatable>: Equatable {
        case value(T)
        case error(String)
    }

    /// Both decoders' answers.
    func answers<T: Decodable & Equatable>(_ type: T.Type, _ text: String) -> (ours: Answer<T>, foundation: Answer<T>) {
        func answer(_ d: JSONDecoder) -> Answer<T> {
            do { return .value(try d.decode(type, from: Data(text.utf8))) } catch { return .error("\(error)") }
        }
        return (answer(Self.text), answer(Self.foundation))
    }

    func same<T: Decodable & Equatable>(
        _ type: T.Type, _ text: String, read: Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let (ours, foundation) = answers(type, text)
        #expect(ours == foundation, "\(text)", sourceLocation: sourceLocation)
        let own = TextJSONDecoder.read(type, from: Data(text.utf8), dates: .text)
        #expect((own != nil) == read, "read by the reader itself: \(text)", sourceLocation: sourceLocation)
        if let own {
            #expect(own == (try? Self.foundation.decode(type, from: Data(text.utf8))), sourceLocation: sourceLocation)
        }
    }

    @Test func everyKindOfValueFoundationReadsIsReadAlikeWithoutFoundation() throws {
        same(Everything.self, Self.everything, read: true)
        let value = try Self.text.decode(Everything.self, from: Data(Self.everything.utf8))
        #expect(value.s == "a \"quoted\" \\ / / \u{8}\u{c}\n\r\t é ☃ é☃ A")
        #expect(value.i == Int.min && value.u64 == UInt64.max && value.whole == -123_456_789_012_345)
        #expect(value.absent == nil && value.null == nil && value.present == 0)
        #expect(value.byName == ["one": 1, "": 0, "two": -2] && value.maybe == [nil, 1, nil])
        same([Int].self, "[]", read: true)
        same([String: [Kind]].self, #"{"a": ["alpha"], "b": []}"#, read: true)
        same(Inner.self, " \t\r\n{ \"name\" : \"n\" , \"tags\" : [ \"t\" ] } \n", read: true)
    }

    @Test func whatFoundationReadsItsOwnWayOrRefusesGoesToFoundation() {
        struct Number: Codable, Equatable { var n: Double }
        struct Small: Codable, Equatable { var n: Int8 }
        struct Whole: Codable, Equatable { var n: Int }
        struct Single: Codable, Equatable { var f: Float }
        struct Special: Codable, Equatable { var d: Data?, u: URL?, x: Decimal? }
        // Numbers the reader leaves alone: fractions, exponents, -0, more than 15 digits for a double.
        for n in ["12.5", "1e3", "1E-2", "-0", "-0.0", "1e400"] {
            same(Number.self, #"{"n": \#(n)}"#, read: false)
            same(Whole.self, #"{"n": \#(n)}"#, read: false)
        }
        same(Number.self, #"{"n": -999999999999999}"#, read: true)
        same(Number.self, #"{"n": 1000000000000000}"#, read: false)
        same(Whole.self, #"{"n": 1000000000000000}"#, read: true)
        same(Single.self, #"{"f": 1}"#, read: false)
        same(Small.self, #"{"n": 128}"#, read: false)
        same(Small.self, #"{"n": -129}"#, read: false)
        same(Whole.self, #"{"n": 9223372036854775808}"#, read: false)
        same(Whole.self, #"{"n": -9223372036854775809}"#, read: false)
        same(Whole.self, #"{"n": "1"}"#, read: false)
        same(Whole.self, #"{"n": null}"#, read: false)
        same(Whole.self, #"{"m": 1}"#, read: false)
        same(Whole.self, #"{"n": 1, "n": 2}"#, read: false)  // a repeated key
        same(Whole.self, #"{"n": 1, "\u006e": 2}"#, read: false)
        same(Whole.self, #"{"\u006e": 2}"#, read: false)
        same(Special.self, #"{"d": "AAEC", "u": "https://example.com/a", "x": 1}"#, read: false)
        same(Special.self, "{}", read: true)
        // Text that is not JSON, or that Foundation reads otherwise.
        for bad in [
            #"{"n": 1,}"#, #"{"n": 01}"#, #"{'n': 1}"#, #"{"n": 1"#, #"{"n" 1}"#, #"{"n": +1}"#, #"{"n": .5}"#,
            #"{"n": 1.}"#, #"{"n": 1e}"#, "{\"n\": 1}\u{0}", #"{"n": 1} {}"#, "\u{FEFF}{\"n\": 1}", "1", "\"1\"", "",
            #"{"n": tru}"#, #"{"n": nulll}"#, "{\"s\u{1}\": 1}", #"{"s": "\ud83d\ude00"}"#, #"{"s": "\x"}"#,
            #"{"s": "\u12"}"#, "[" + String(repeating: "[", count: 70) + String(repeating: "]", count: 71),
        ] {
            same(Whole.self, bad, read: false)
            same([String: String].self, bad, read: false)
        }
        let notUTF8 = Data(Array(#"{""#.utf8) + [0xC3] + Array(#"":1}"#.utf8))
        #expect(TextJSONDecoder.read([String: Int].self, from: notUTF8, dates: .text) == nil)
        #expect(throws: (any Error).self) { try Self.text.decode([String: Int].self, from: notUTF8) }
    }

    /// What only Foundation's own ways tell apart: keys it compares as `String`s (canonically
    /// equivalent text is equal), an array element a type fails to decode and then reads as
    /// something else, keys naming one number two ways, 128-bit integers, dates set after `init`.
    @Test func whatOnlyFoundationTellsApartGoesToFoundation() throws {
        struct Kelvin: Codable, Equatable { var K: Int? }
        let kelvin = "{\"\u{212A}\": 5}"  // the Kelvin sign, which is "K" to Swift's String
        same(Kelvin.self, kelvin, read: false)
        #expect(try Self.text.decode(Kelvin.self, from: Data(kelvin.utf8)).K == 5)
        same([String: String].self, "{\"caf\u{E9}\": \"a\", \"cafe\u{301}\": \"b\"}", read: false)
        same([String: Int].self, #"{"a": 1, "b": 2}"#, read: true)
        struct Accent: Codable, Equatable {
            var cafe: Int?
            enum CodingKeys: String, CodingKey { case cafe = "caf\u{E9}" }  // a key name above ASCII
        }
        same(Accent.self, #"{"a": 1}"#, read: false)

        struct Lossy: Decodable, Equatable {
            var kinds: [Kind] = []
            init(from decoder: any Decoder) throws {
                var c = try decoder.unkeyedContainer()
                while !c.isAtEnd {
                    if let kind = try? c.decode(Kind.self) { kinds.append(kind) } else { _ = try c.decode(String.self) }
                }
            }
        }
        let list = #"["alpha", "gamma", "beta"]"#
        same(Lossy.self, list, read: false)
        #expect(try Self.text.decode(Lossy.self, from: Data(list.utf8)).kinds == [.alpha, .beta])

        // Which of "1" and "01" Foundation keeps depends on its dictionary's order.
        let twice = Data(#"{"1": "a", "01": "b"}"#.utf8)
        #expect(TextJSONDecoder.read([Int: String].self, from: twice, dates: .text) == nil)
        same([Int: String].self, #"{"1": "a", "-2": "b"}"#, read: true)

        struct Wide: Decodable, Equatable {
            var n: Int128?
            enum CodingKeys: CodingKey { case n }
            init(from decoder: any Decoder) throws {
                n = try? decoder.container(keyedBy: CodingKeys.self).decode(Int128.self, forKey: .n)
            }
        }
        same(Wide.self, #"{"n": 5}"#, read: false)

        struct When: Decodable, Equatable { var at: Date }
        let iso = JSONDecoder()
        iso.dateDecodingStrategy = .iso8601
        let ours = TextJSONDecoder(dates: .text)
        ours.dateDecodingStrategy = .iso8601
        for text in [#"{"at": "2026-12-07T03:00:00.123Z"}"#, #"{"at": "2026-12-07T03:00:00Z"}"#] {
            let data = Data(text.utf8)
            #expect((try? ours.decode(When.self, from: data)) == (try? iso.decode(When.self, from: data)))
        }
    }

    /// A type that catches an error and carries on must not keep what it made of the reader's
    /// answer: Foundation reads the whole text again.
    @Test func aCaughtErrorStillSendsTheTextToFoundation() throws {
        struct Lenient: Decodable, Equatable {
            var n: Double
            enum CodingKeys: CodingKey { case n }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                n = (try? c.decode(Double.self, forKey: .n)) ?? -1
            }
        }
        same(Lenient.self, #"{"n": 12.5}"#, read: false)
        #expect(try Self.text.decode(Lenient.self, from: Data(#"{"n": 12.5}"#.utf8)).n == 12.5)
        same(Lenient.self, #"{"n": 12}"#, read: true)
    }

    /// Random edits of a body (bytes that matter to JSON put in, taken out, swapped): whatever
    /// comes of each, both decoders answer the same.
    @Test func editedTextsAreAnsweredAsFoundationAnswersThem() {
        var rng = SplitMix(seed: 37)
        let alphabet = Array(#"{}[]",:0123456789-+.eE"\/ntfu aé"#.utf8)
        let source = Array(Self.everything.utf8)
        var readByItself = 0
        for _ in 0..<3000 {
            var bytes = source
            for _ in 0...Int(rng.next() % 3) {
                let at = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[at] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: at)
                default: bytes.remove(at: at)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let (ours, foundation) = answers(Everything.self, text)
            #expect(ours == foundation, "\(text)")
            if let own = TextJSONDecoder.read(Everything.self, from: Data(text.utf8), dates: .text) {
                readByItself += 1
                #expect(own == (try? Self.foundation.decode(Everything.self, from: Data(text.utf8))), "\(text)")
            }
        }
        #expect(readByItself > 100)  // edits inside strings and ignored values still read alike
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}
