import Core
import Foundation

/// A sample value of a schema: the `example` of every JSON body that has no samples of its own
/// (`APIExampled`). Each field gets a value of its type: the first of its closed values, a value of
/// its format or pattern, or one its name suggests. Made from the schema, it cannot drift from it.
enum SchemaSample {
    static func value(
        _ schema: JSONSchema, name: String? = nil, schemas: [String: JSONSchema], depth: Int = 0
    ) -> JSONValue {
        // References nest a few deep; one that held itself (none does) would end in null, not forever.
        guard depth < 12 else { return .null }
        switch schema.shape {
        case .reference(let ref):
            guard let target = schemas[ref] else { return .null }
            return value(target, name: name, schemas: schemas, depth: depth + 1)
        case .any: return .object([:])
        case .null: return .null
        case .boolean: return .bool(false)
        case .integer:
            return .number(Double(schema.defaultValue ?? max(schema.minimum ?? 1, min(schema.maximum ?? 1, 1))))
        case .number: return .number(9.99)
        case .string: return .string(string(schema, name: name))
        case .array(let items):
            return .array([value(items, name: name.map(singular), schemas: schemas, depth: depth)])
        case .object(let fields):
            return .object(
                Dictionary(
                    uniqueKeysWithValues: fields.map {
                        ($0.name, value($0.schema, name: $0.name, schemas: schemas, depth: depth))
                    }))
        case .map(let values):
            return .object(["key": value(values, name: nil, schemas: schemas, depth: depth)])
        }
    }

    /// Strings by what the schema says, then by the field's name.
    static func string(_ schema: JSONSchema, name: String?) -> String {
        if let first = schema.values?.first { return first }
        switch schema.format {
        case "uuid": return "6F9619FF-8B86-D011-B42D-00C04FC964FF"
        case "date-time": return "2026-04-01T00:00:00.000Z"
        case "uri": return "https://app.example.com/redeem"
        default: break
        }
        if let pattern = schema.pattern, let sample = byPattern[pattern] { return sample }
        let key = (name ?? "").lowercased()
        if let sample = byName.first(where: { key == $0.key || key.hasSuffix($0.key) })?.value { return sample }
        return name.map { "a \($0)" } ?? "text"
    }

    private static let byPattern = [
        #"^[0-9]+(\.[0-9]{1,2})?$"#: "9.99", "^[A-Z]{3}$": "USD", "^[A-Za-z0-9_-]{3,64}$": "SPRING-25",
        "^[A-Za-z0-9]{1,12}$": "GIFT"
    ]

    private static let byName: KeyValuePairs<String, String> = [
        "email": "pilot@example.com", "password": "correct horse battery staple", "code": "SPRING-25",
        "currency": "USD", "amount": "9.99", "url": "https://hooks.example.com/redeem", "token": "tok_3q2EXAMPLE",
        "productid": "pro.monthly", "entitlementid": "pro", "appuserid": "9b2e4c1d-7a35-4f60-8e21-3c5d6a7b8c90",
        "name": "Spring campaign", "platform": "web", "country": "US", "reason": "alreadyOwned"
    ]

    private static func singular(_ name: String) -> String { name.hasSuffix("s") ? String(name.dropLast()) : name }
}
