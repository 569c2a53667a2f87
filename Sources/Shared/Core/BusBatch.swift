import Foundation

/// Many requests of one type in one message, answered in order. A caller that gathers concurrent
/// requests (a `Coalescer`) pays one envelope, one send and one reply for the lot: for small
/// requests such as validations, the envelope's encoding and decoding cost more than the items.
public protocol BusBatch: BusRequest {
    associatedtype Item: BusRequest
    init(items: [Item])
    /// The answers, one per item and in the items' order.
    static func answers(in response: Response) -> [Result<Item.Response, any Error>]
}

/// One item's answer in a batch whose items can fail on their own: its value or its error.
public struct BatchAnswer<Value: Codable & Sendable>: Codable, Sendable {
    public var value: Value?
    public var error: ServiceError?

    /// Errors that are not a `ServiceError` travel as `ServiceError.carrying` makes them, as a single request's would.
    public init(_ result: Result<Value, any Error>) {
        switch result {
        case .success(let v): value = v
        case .failure(let e): error = .carrying(e)
        }
    }

    public var result: Result<Value, any Error> {
        if let value { return .success(value) }
        return .failure(error ?? ServiceError.malformed("a batch answer with neither value nor error"))
    }
}
