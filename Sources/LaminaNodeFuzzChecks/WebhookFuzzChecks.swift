import Foundation
import LaminaNode
import LaminaWireFuzzChecks
import NIOCore

extension NodeFuzzChecks {
    /// The webhooks API's `POST /webhooks` body (``WebhookRegistration``): the input's first
    /// line is the `Content-Type`, the rest the body. It is accepted within ``WebhookLimits``
    /// (an https `target_url` of at most 2,048 bytes with a host and a port 1...65535 and a
    /// request target starting with `/`, distinct known events, a secret of 16...256 bytes,
    /// `config` a JSON object of at most 4,096 bytes) or refused with 400, 415 or 422 and
    /// Layer's error fields, never anything else.
    public static func checkWebhookRegistration(_ input: [UInt8]) throws(PropertyViolation) {
        let newline = input.firstIndex(of: 0x0A) ?? input.endIndex
        let contentType = String(decoding: input[..<newline], as: UTF8.self)
        let body = ByteBuffer(bytes: input[min(newline + 1, input.endIndex)...])
        func violation(_ detail: String) -> PropertyViolation {
            PropertyViolation(property: "webhook-registration", detail: detail, input: input)
        }
        let registration: WebhookRegistration
        do {
            registration = try WebhookRegistration.parse(contentType: contentType, body: body)
        } catch {
            guard [400, 415, 422].contains(error.status), !error.id.isEmpty, !error.message.isEmpty else {
                throw violation("refused with \(error.status) \(error.id): \(error.message)")
            }
            return
        }
        let known = Set(WebhookEventNames.all)
        guard registration.targetURL.utf8.count <= WebhookLimits.maxTargetURLBytes,
            registration.targetURL.lowercased().hasPrefix("https:"),
            !registration.host.isEmpty, (1...65_535).contains(registration.port), registration.path.hasPrefix("/")
        else {
            throw violation(
                "accepted target \(registration.targetURL.prefix(200)) as \(registration.host):\(registration.port)\(registration.path.prefix(100))"
            )
        }
        guard !registration.events.isEmpty, Set(registration.events).count == registration.events.count,
            registration.events.allSatisfy(known.contains)
        else { throw violation("accepted events \(registration.events)") }
        guard WebhookLimits.secretBytes.contains(registration.secret.utf8.count) else {
            throw violation("accepted a secret of \(registration.secret.utf8.count) bytes")
        }
        if let config = registration.config {
            guard config.count <= WebhookLimits.maxConfigBytes,
                (try? JSONDecoder().decode(JSONValue.self, from: config))?.object != nil
            else {
                throw violation("accepted a config of \(config.count) bytes that is not an object")
            }
        }
    }
}
