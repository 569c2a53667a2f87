import Core
import Foundation

extension RedeemPage {
    /// Tokens live in this script's memory only: never in the URL, storage or logs. Text from the
    /// URL or from responses is only ever set with `textContent` / `value`, never as markup.
    ///
    /// What the server refuses, the page says in the server's words: an error's `message`, and
    /// for a code validate refuses, its reason's sentence (`RefusalReason.sentence`, written into
    /// the script as it is served). The script's own sentences are about the page itself: a field
    /// left empty, the network, the steps of a redemption.
    static let script = scriptTemplate.replacingOccurrences(of: "/*REFUSALS*/", with: refusalSentences)

    /// `{"notFound": "There is no coupon with this code.", …}`
    static let refusalSentences: String = {
        let sentences = Dictionary(uniqueKeysWithValues: RefusalReason.allCases.map { ($0.rawValue, $0.sentence) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // JSON text is a JavaScript object literal.
        return String(decoding: (try? encoder.encode(sentences)) ?? Data("{}".utf8), as: UTF8.self)
    }()

    private static let scriptTemplate = String(decoding: PackageResources.redeem_js, as: UTF8.self)
}
