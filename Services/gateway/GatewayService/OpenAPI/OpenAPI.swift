import Core

/// The parts of an OpenAPI 3.1 document the gateway writes (`OpenAPIDocument` fills them from the
/// route table). Fields left nil are left out.
enum OpenAPI {
    struct Document: Encodable {
        var openapi = "3.1.0"
        var info: Info
        var servers: [Server]
        var tags: [Tag]
        /// Path template → lower-case method → operation.
        var paths: [String: [String: Operation]]
        /// Event type → `post` → what Redeem sends an operator's endpoint (docs/webhooks.md).
        var webhooks: [String: [String: Operation]]
        var components: Components
    }

    struct Tag: Encodable {
        var name: String
        var description: String
    }

    struct Info: Encodable {
        var title: String
        var version: String
        var description: String
    }

    struct Server: Encodable {
        var url: String
    }

    struct Operation: Encodable {
        var tags: [String]
        var summary: String
        var operationId: String
        var description: String?
        var parameters: [ParameterItem]?
        /// Empty: no credential. Otherwise the bearer scheme.
        var security: [[String: [String]]]
        var requestBody: RequestBody?
        /// By status code.
        var responses: [String: Response]
    }

    /// A parameter written out, or a reference to one of `components.parameters` (the headers
    /// every operation of a kind takes).
    enum ParameterItem: Encodable {
        case parameter(Parameter)
        case reference(String)

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .parameter(let p): try p.encode(to: encoder)
            case .reference(let name): try Reference(ref: "#/components/parameters/" + name).encode(to: encoder)
            }
        }
    }

    struct Reference: Encodable {
        var ref: String
        private enum CodingKeys: String, CodingKey { case ref = "$ref" }
    }

    struct Parameter: Encodable {
        enum Location: String, Encodable { case path, query, header }
        var name: String
        var location: Location
        var required: Bool
        var schema: JSONSchema
        var description: String?

        private enum CodingKeys: String, CodingKey {
            case name, required, schema, description
            case location = "in"
        }
    }

    struct RequestBody: Encodable {
        var required: Bool
        var content: [String: MediaType]
    }

    struct Response: Encodable {
        var description: String
        /// By header name: references to `components.headers`.
        var headers: [String: Reference]?
        var content: [String: MediaType]?
        /// The error codes an error answer of this status may carry (an extension of the document).
        var errorCodes: [String]?

        private enum CodingKeys: String, CodingKey {
            case description, headers, content
            case errorCodes = "x-error-codes"
        }
    }

    struct Header: Encodable {
        var description: String
        var schema: JSONSchema
    }

    struct MediaType: Encodable {
        var schema: JSONSchema
        /// A sample body (`ResponseExamples.swift`), or several by name in `examples`.
        var example: JSONValue?
        var examples: [String: Example]?
        /// True when `example` was made from the schema (`SchemaSample`), not written as a sample of
        /// the type (`APIExampled`): the clients' contract tests read only written ones.
        var exampleFromSchema: Bool?

        private enum CodingKeys: String, CodingKey {
            case schema, example, examples
            case exampleFromSchema = "x-example-from-schema"
        }
    }

    struct Example: Encodable {
        var value: JSONValue
    }

    struct Components: Encodable {
        var securitySchemes: [String: SecurityScheme]
        var parameters: [String: Parameter]
        var headers: [String: Header]
        var schemas: [String: JSONSchema]
    }

    struct SecurityScheme: Encodable {
        var type: String
        /// `http` schemes: `bearer`.
        var scheme: String?
        /// `apiKey` schemes: where the credential is (`cookie`) and its name.
        var location: String?
        var name: String?
        var description: String

        private enum CodingKeys: String, CodingKey {
            case type, scheme, name, description
            case location = "in"
        }
    }
}
