import Core

/// The parts of an OpenAPI 3.1 document the gateway writes (`OpenAPIDocument` fills them from the
/// route table). Fields left nil are left out.
enum OpenAPI {
    struct Document: Encodable {
        var openapi = "3.1.0"
        var info: Info
        var servers: [Server]
        /// Path template → lower-case method → operation.
        var paths: [String: [String: Operation]]
        var components: Components
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
        var summary: String
        var operationId: String
        var description: String?
        var parameters: [Parameter]?
        /// Empty: no credential. Otherwise the bearer scheme.
        var security: [[String: [String]]]
        var requestBody: RequestBody?
        /// By status code.
        var responses: [String: Response]
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
        var content: [String: MediaType]?
    }

    struct MediaType: Encodable {
        var schema: JSONSchema
        /// A sample body (`ResponseExamples.swift`), or several by name in `examples`.
        var example: JSONValue?
        var examples: [String: Example]?
    }

    struct Example: Encodable {
        var value: JSONValue
    }

    struct Components: Encodable {
        var securitySchemes: [String: SecurityScheme]
        var schemas: [String: JSONSchema]
    }

    struct SecurityScheme: Encodable {
        var type: String
        var scheme: String
        var description: String
    }
}
