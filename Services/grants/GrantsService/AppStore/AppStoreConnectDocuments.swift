import Foundation

/// The parts of App Store Connect's JSON:API documents Redeem reads: resources with their
/// attributes and to-one linkages, what was included, the next page, and the error document
/// `{errors: [{status, code, title, detail}]}`. Anything else in them is ignored.
enum JSONAPI {
    struct Page<Attributes: Decodable>: Decodable {
        var data: [Resource<Attributes>]
        var included: [Resource<IncludedAttributes>]?
        var links: Links?
    }

    struct Single<Attributes: Decodable>: Decodable {
        var data: Resource<Attributes>
    }

    struct Links: Decodable {
        var next: String?
    }

    struct Resource<Attributes: Decodable>: Decodable {
        var type: String
        var id: String
        var attributes: Attributes?
        var relationships: [String: Relationship]?

        /// The id a to-one relationship links to, when the document carries its linkage.
        func linked(_ name: String) -> String? { relationships?[name]?.data?.id }
    }

    /// A relationship: its linkage when it is a to-one the document carries (a to-many, or one
    /// given only as links, reads as none).
    struct Relationship: Decodable {
        var data: Linkage?
        enum Keys: String, CodingKey { case data }
        init(from decoder: any Decoder) throws {
            data = try? decoder.container(keyedBy: Keys.self).decodeIfPresent(Linkage.self, forKey: .data)
        }
    }

    struct Linkage: Decodable {
        var type: String
        var id: String
    }

    /// Attributes of the included resources Redeem reads: price points and territories.
    struct IncludedAttributes: Decodable {
        var customerPrice: String?
        var currency: String?
    }

    struct OfferAttributes: Decodable {
        var name: String?
        var active: Bool?
    }

    struct CustomCodeAttributes: Decodable {
        var customCode: String?
        var active: Bool?
        var createdDate: String?
    }

    struct PriceAttributes: Decodable {
        /// `YYYY-MM-DD`, or null for a price in effect since before any scheduled change.
        var startDate: String?
        /// A price kept for existing subscribers, not the one new customers pay.
        var preserved: Bool?
    }

    struct PricePointAttributes: Decodable {
        var customerPrice: String?
    }

    struct ErrorDocument: Decodable {
        struct Item: Decodable {
            var code: String?
            var title: String?
            var detail: String?
        }
        var errors: [Item]
    }

    /// Apple's message in an error document: the first error's `detail` (else its title), at most
    /// 500 characters; nil when the body holds none.
    static func message(_ body: Data) -> String? {
        guard let document = try? JSONDecoder().decode(ErrorDocument.self, from: body), let first = document.errors.first,
              let text = first.detail ?? first.title, !text.isEmpty else { return nil }
        return String(text.prefix(500))
    }

    /// Apple's `createdDate`: ISO 8601 with or without fractional seconds.
    static func date(_ text: String?) -> Date? {
        guard let text else { return nil }
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = format.date(from: text) { return date }
        format.formatOptions = [.withInternetDateTime]
        return format.date(from: text)
    }
}
