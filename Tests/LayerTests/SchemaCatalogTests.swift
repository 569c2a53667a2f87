import Foundation
import Testing
@testable import Core

/// A body's schema comes from its Decodable definition: what it reads, as what, and whether it
/// may be left out; its rules add the rest, and a rule for a field it does not have is an error.
@Suite struct SchemaCatalogTests {
    struct Item: APIBody {
        static let schemaName: String? = "Item"
        var id: UUID
        var name: String
    }

    struct Sample: APIBody {
        static let schemaName: String? = "Sample"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "count": JSONSchema.Rule.range(1...9),
            "note": [.required, .pattern("^[a-z]+$")],
            "tags": [.items([.oneOf(["a", "b"])])],
            "next": [.alwaysSent],
        ]
        var id: UUID
        var owner: UUID?
        var at: Date
        var count: Int
        var note: String?
        var tags: [String]
        var platform: Platform
        var platforms: [Platform]?
        var item: Item
        var maybe: Item?
        var items: [Item]?
        var byName: [String: Int]
        var next: String?
        var flag: Bool?
    }

    func encoded(_ schema: JSONSchema) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(schema)) as? [String: Any])
    }

    @Test func fieldsTypesAndWhatMayBeLeftOutComeFromTheDefinition() throws {
        let catalog = SchemaCatalog()
        #expect(try catalog.schema(of: Sample.self) == .reference("Sample"))
        let sample = try encoded(try #require(catalog.schemas["Sample"]))
        let properties = try #require(sample["properties"] as? [String: [String: Any]])
        #expect(Set(properties.keys) == ["id", "owner", "at", "count", "note", "tags", "platform", "platforms", "item", "maybe", "items", "byName", "next", "flag"])
        #expect(Set(sample["required"] as? [String] ?? []) == ["id", "at", "count", "note", "tags", "platform", "item", "byName", "next"])

        // Ids and times by their format, whether or not they may be left out.
        #expect(properties["id"]?["format"] as? String == "uuid")
        #expect(properties["id"]?["type"] as? String == "string")
        #expect(properties["owner"]?["format"] as? String == "uuid")
        #expect(properties["owner"]?["type"] as? [String] == ["string", "null"])
        #expect(properties["at"]?["format"] as? String == "date-time")
        // A field that may be left out may be null; a required one may not, unless always sent as null.
        #expect(properties["flag"]?["type"] as? [String] == ["boolean", "null"])
        #expect(properties["next"]?["type"] as? [String] == ["string", "null"])
        #expect(properties["note"]?["type"] as? String == "string")
        #expect(properties["note"]?["pattern"] as? String == "^[a-z]+$")
        #expect(properties["count"]?["minimum"] as? Int == 1 && properties["count"]?["maximum"] as? Int == 9)
        // A closed Swift type is its cases; adding one adds it here.
        #expect(properties["platform"]?["enum"] as? [String] == Platform.allCases.map(\.rawValue))
        let platforms = try #require(properties["platforms"])
        #expect(platforms["type"] as? [String] == ["array", "null"])
        #expect((platforms["items"] as? [String: Any])?["enum"] as? [String] == ["ios", "android", "web"])
        #expect((properties["tags"]?["items"] as? [String: Any])?["enum"] as? [String] == ["a", "b"])
        // Named bodies are references, and join the catalog; a nullable one is "that or null".
        #expect(properties["item"]?["$ref"] as? String == "#/components/schemas/Item")
        let maybe = try #require(properties["maybe"]?["anyOf"] as? [[String: Any]])
        #expect(maybe.count == 2 && maybe[0]["$ref"] as? String == "#/components/schemas/Item" && maybe[1]["type"] as? String == "null")
        #expect(properties["items"]?["type"] as? [String] == ["array", "null"])
        #expect((properties["items"]?["items"] as? [String: Any])?["$ref"] as? String == "#/components/schemas/Item")
        #expect(catalog.schemas["Item"] != nil)
        #expect(((properties["byName"]?["additionalProperties"]) as? [String: Any])?["type"] as? String == "integer")
    }

    struct Misspelt: APIBody {
        static let fieldRules: [String: [JSONSchema.Rule]] = ["nmae": [.required]]
        var name: String
    }

    /// Reads nothing but its own way: a type of the reader's does not follow.
    struct Opaque: APIBody {
        var text: String
        init(from decoder: any Decoder) throws {
            var c = try decoder.unkeyedContainer()
            _ = try c.nestedUnkeyedContainer()
            text = ""
        }
    }

    @Test func aRuleForAFieldThatIsNotThereOrABodyItCannotReadIsAnError() {
        #expect(throws: SchemaCatalog.Problem.self) { try SchemaCatalog().schema(of: Misspelt.self) }
        #expect(throws: SchemaCatalog.Problem.self) { try SchemaCatalog().schema(of: Opaque.self) }
    }

    enum First { struct Body: APIBody { static let schemaName: String? = "Same"; var a: Int } }
    enum Second { struct Body: APIBody { static let schemaName: String? = "Same"; var b: Int } }

    @Test func twoBodiesCannotShareAName() throws {
        let catalog = SchemaCatalog()
        _ = try catalog.schema(of: First.Body.self)
        _ = try catalog.schema(of: First.Body.self)  // the same one again is fine
        #expect(throws: SchemaCatalog.Problem.self) { try catalog.schema(of: Second.Body.self) }
    }

    /// The rules of a custom decoder are followed: every key is there, none is null.
    @Test func aCustomDecoderIsReadByWhatItAsks() throws {
        struct Patch: APIBody {
            var active: Bool?
            var removing: [String] = []
            enum K: String, CodingKey { case active, end }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: K.self)
                if c.contains(.active), try c.decodeNil(forKey: .active) { throw DecodingError.valueNotFound(Bool.self, .init(codingPath: [], debugDescription: "")) }
                active = try c.decodeIfPresent(Bool.self, forKey: .active)
                _ = try c.decodeIfPresent(Date.self, forKey: .end)
            }
        }
        let schema = try SchemaCatalog().schema(of: Patch.self)
        #expect(schema.fields.map(\.name) == ["active", "end"])
        #expect(schema.fields.allSatisfy { !$0.required && $0.schema.nullable })
    }
}
