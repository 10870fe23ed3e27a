import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport

/// How one push attempt ended.
enum PushOutcome: Sendable, Equatable {
    case delivered
    /// Try again, no sooner than `after` seconds when the provider said so.
    case retry(String, after: Int?)
    /// The provider refused this push for good (dropped).
    case refused(String)
    /// The token is no longer valid (unregistered, bad token): the push is dropped and the
    /// token removed.
    case unregistered(String)
}

/// A push provider's client: renders a notification in the provider's format and sends it.
protocol PushProvider: Sendable {
    var kind: PushToken.Kind { get }
    func send(_ push: QueuedPush, _ notification: PushNotification) async -> PushOutcome
    func shutdown() async
}

extension PushOutcome {
    /// The common reading of an HTTP status: 2xx delivered; 408, 429 and 5xx retried (with
    /// `Retry-After`); anything else refused. Providers refine it (tokens that are gone).
    static func http(status: Int, headers: HeaderFields, provider: String) -> PushOutcome {
        switch status {
        case 200..<300: .delivered
        case 408, 429, 500..<600: .retry("\(provider) answered \(status)", after: RetryBackoff.retryAfter(headers))
        default: .refused("\(provider) answered \(status)")
        }
    }
}
