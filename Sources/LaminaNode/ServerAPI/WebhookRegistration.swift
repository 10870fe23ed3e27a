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
        // Layer's reference names the list `events`; its registration examples `event_types`.
        let eventsKey = body["events"] == nil && body["event_types"] != nil ? "event_types" : "events"
        guard let rawEvents = body[eventsKey] else { throw .missingProperty("events") }
        guard let list = rawEvents.array, case let events = list.compactMap(\.string), events.count == list.count,
            !events.isEmpty, Set(events).count == events.count, list.count <= WebhookEventNames.all.count
        else {
            throw .invalidProperty(eventsKey, "\(eventsKey) must be a non-empty array of distinct event types")
        }
        if let unknown = events.first(where: { WebhookEventNames.type(named: $0) == nil }) {
            throw .invalidProperty(
                eventsKey,
                "unknown event type \(unknown.prefix(100)) (known: \(WebhookEventNames.all.joined(separator: ", ")))")
        }
        let types = events.compactMap(WebhookEventNames.type(named:))
        guard Set(types).count == types.count else {
            throw .invalidProperty(eventsKey, "\(eventsKey) names one event type twice (by both its names)")
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
