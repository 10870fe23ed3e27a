import Foundation
import NIOCore

/// The body of `POST /webhooks` (Layer's Webhooks API 3.0), checked against ``WebhookLimits``
/// before anything else happens (no name is resolved, nothing is stored): `target_url`, an
/// https URL; `events`, distinct known event types; `secret`; optional `config`, an object.
/// Pure, so the fuzz target `FuzzWebhookRequest` runs it on any input.
public struct WebhookRegistration: Sendable {
    /// The `target_url` as sent.
    public var targetURL: String
    /// Its host (lower-cased, IPv6 without brackets), port and request target (path and query).
    public var host: String
    public var port: Int
    public var path: String
    /// The subscribed event types, in the order sent.
    public var events: [String]
    /// The HMAC-SHA1 key.
    public var secret: String
    /// `config` as JSON with sorted keys, at most ``WebhookLimits/maxConfigBytes``.
    public var config: Data?

    /// Parses a request's `Content-Type` and body: 415 when it is not JSON, 400 when the
    /// body is not a JSON object, 422 naming the property otherwise.
    public static func parse(contentType: String?, body: ByteBuffer) throws(ServerAPIError) -> WebhookRegistration {
        guard (contentType ?? "").lowercased().hasPrefix("application/json") else {
            throw .invalidHeader(415, "Content-Type", "POST needs Content-Type: application/json")
        }
        let body = try ServerAPIJSON.object(body)
        guard let rawURL = body["target_url"] else { throw .missingProperty("target_url") }
        guard let targetURL = rawURL.string else { throw .invalidProperty("target_url", "target_url must be a string") }
        let target: WebhookTarget
        switch WebhookTarget.parse(targetURL) {
        case .success(let t): target = t
        case .failure(let e): throw .invalidProperty("target_url", e.reason)
        }
        guard let rawEvents = body["events"] else { throw .missingProperty("events") }
        guard let list = rawEvents.array, case let events = list.compactMap(\.string), events.count == list.count,
            !events.isEmpty, Set(events).count == events.count
        else {
            throw .invalidProperty("events", "events must be a non-empty array of distinct event types")
        }
        let known = Set(WebhookEventType.allCases.map(\.rawValue))
        if let unknown = events.first(where: { !known.contains($0) }) {
            throw .invalidProperty(
                "events", "unknown event type \(unknown) (known: \(known.sorted().joined(separator: ", ")))")
        }
        guard let rawSecret = body["secret"] else { throw .missingProperty("secret") }
        guard let secret = rawSecret.string, WebhookLimits.secretBytes.contains(secret.utf8.count) else {
            throw .invalidProperty(
                "secret",
                "secret must be a string of \(WebhookLimits.secretBytes.lowerBound)...\(WebhookLimits.secretBytes.upperBound) bytes"
            )
        }
        var config: Data?
        if let raw = body["config"], !raw.isNull {
            guard raw.object != nil, let data = try? ServerAPIJSON.encode(raw, escapingSlashes: true) else {
                throw .invalidProperty("config", "config must be an object")
            }
            guard data.count <= WebhookLimits.maxConfigBytes else {
                throw .invalidProperty("config", "config is larger than \(WebhookLimits.maxConfigBytes) bytes")
            }
            config = data
        }
        return WebhookRegistration(
            targetURL: targetURL, host: target.host, port: target.port, path: target.path,
            events: events, secret: secret, config: config)
    }

    /// The checked target.
    var target: WebhookTarget { WebhookTarget(host: host, port: port, path: path) }
}
