import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport

/// Layer's Webhooks REST API 3.0 beside the Platform API: same tokens, `Accept:
/// application/vnd.layer.webhooks+json; version=3.0`, Layer's error object. A new webhook
/// is `unverified` until its target answers the verification challenge, then `active`.
extension ServerAPI {
    /// The webhooks' media type.
    static let webhooksMediaType = "application/vnd.layer.webhooks+json"
    /// The content type of the webhooks API's JSON responses.
    static let webhooksContentType = "application/json; charset=utf-8"

    static let webhookTable: [(Route, Handler)] = [
        (Route(method: "POST", template: "/apps/{app_id}/webhooks"), { try await $0.createWebhook($1) }),
        (Route(method: "GET", template: "/apps/{app_id}/webhooks"), { try await $0.listWebhooks($1) }),
        (Route(method: "GET", template: "/apps/{app_id}/webhooks/{webhook_id}"), { try await $0.getWebhook($1) }),
        (Route(method: "DELETE", template: "/apps/{app_id}/webhooks/{webhook_id}"), { try await $0.deleteWebhook($1) }),
        (
            Route(method: "POST", template: "/apps/{app_id}/webhooks/{webhook_id}/activate"),
            { try await $0.activateWebhook($1) }
        ),
        (
            Route(method: "POST", template: "/apps/{app_id}/webhooks/{webhook_id}/deactivate"),
            { try await $0.deactivateWebhook($1) }
        ),
    ]

    /// `Accept: application/vnd.layer.webhooks+json; version=3.0` (406 otherwise).
    static func webhooksVersion(_ accept: String?) throws(ServerAPIError) {
        let required = "an `Accept: \(webhooksMediaType); version=3.0` header is required"
        guard let accept else { throw .invalidHeader(406, "Accept", required) }
        let items = accept.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard items.first == webhooksMediaType, items.dropFirst().contains("version=3.0") else {
            throw .invalidHeader(406, "Accept", required)
        }
    }

    private var delivery: WebhookDelivery {
        get throws(ServerAPIError) {
            guard let webhooks else { throw .serviceUnavailable("webhooks are not enabled on this node") }
            return webhooks
        }
    }

    /// POST /webhooks: `target_url`, `events`, `secret`, optional `config`; 201, unverified.
    func createWebhook(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let delivery = try delivery
        let registration = try WebhookRegistration.parse(contentType: r.http.headers["content-type"], body: r.http.body)
        if case .failure(let e) = await registration.target.addresses(
            allowPrivate: delivery.settings.allowPrivateTargets)
        {
            throw ServerAPIError.invalidProperty("target_url", e.reason)
        }
        let now = Timestamp.now()
        let webhook = StoredWebhook(
            id: UUID(), targetURL: registration.targetURL, events: registration.events,
            secret: registration.secret, config: registration.config,
            status: .unverified, createdAt: now, updatedAt: now)
        do {
            try await engine.store.write { tx in try tx.createWebhook(webhook, limit: WebhookLimits.maxWebhooks) }
        } catch let error as StorageError where error.code == .invalidArgument {
            throw ServerAPIError(422, "limit_exceeded", 112, error.reason)
        }
        delivery.verifyInBackground(webhook)
        let object = webhookObject(webhook, r)
        return ServerAPIJSON.response(
            201, object, contentType: Self.webhooksContentType, extraHeaders: [("location", object.url)])
    }

    /// GET /webhooks: every webhook, oldest first.
    func listWebhooks(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let all = try await engine.store.read { reader in try reader.webhooks() }
        return ServerAPIJSON.response(200, all.map { webhookObject($0, r) }, contentType: Self.webhooksContentType)
    }

    /// GET /webhooks/:id.
    func getWebhook(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = try r.webhookID()
        guard let webhook = try await engine.store.read({ reader in try reader.webhook(id) }) else {
            throw ServerAPIError.notFound("no webhook \(id.uuidString.lowercased())")
        }
        return ServerAPIJSON.response(200, webhookObject(webhook, r), contentType: Self.webhooksContentType)
    }

    /// DELETE /webhooks/:id: 204; its queued events go with it.
    func deleteWebhook(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = try r.webhookID()
        guard try await delivery.delete(id) else {
            throw ServerAPIError.notFound("no webhook \(id.uuidString.lowercased())")
        }
        return HTTPResponse(status: 204)
    }

    /// POST /webhooks/:id/activate: verifies the target again (Layer's verification), then
    /// active with its queued events due now; 422 when the target does not verify.
    func activateWebhook(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let delivery = try delivery
        let id = try r.webhookID()
        guard let webhook = try await engine.store.read({ reader in try reader.webhook(id) }) else {
            throw ServerAPIError.notFound("no webhook \(id.uuidString.lowercased())")
        }
        if webhook.status != .active, case .failure(let e) = await delivery.verify(webhook) {
            try await delivery.verificationFailed(id, e)
            throw ServerAPIError.invalidProperty("target_url", "the target did not verify: \(e.reason)")
        }
        guard let active = try await delivery.activate(id) else {
            throw ServerAPIError.notFound("no webhook \(id.uuidString.lowercased())")
        }
        return ServerAPIJSON.response(200, webhookObject(active, r), contentType: Self.webhooksContentType)
    }

    /// POST /webhooks/:id/deactivate: inactive; its queued events wait for an activation.
    func deactivateWebhook(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = try r.webhookID()
        guard let inactive = try await delivery.deactivate(id, reason: "deactivated through the API") else {
            throw ServerAPIError.notFound("no webhook \(id.uuidString.lowercased())")
        }
        return ServerAPIJSON.response(200, webhookObject(inactive, r), contentType: Self.webhooksContentType)
    }

    /// Layer's webhook object (the secret is never shown).
    func webhookObject(_ w: StoredWebhook, _ r: ServerAPIRequest) -> WebhookObject {
        let uuid = w.id.uuidString.lowercased()
        return WebhookObject(
            id: "layer:///apps/\(credentials.appID)/webhooks/\(uuid)",
            url: "\(r.representation.base)/webhooks/\(uuid)",
            target_url: w.targetURL,
            events: w.events,
            status: w.status.name,
            status_reason: w.statusReason,
            created_at: ServerAPIJSON.date(millisecondsSince1970: w.createdAt.millisecondsSince1970),
            config: w.config.flatMap(ServerAPIJSON.value))
    }
}

extension ServerAPIRequest {
    func webhookID() throws(ServerAPIError) -> UUID {
        guard let raw = parameters["webhook_id"], let uuid = UUID(uuidString: raw) else {
            throw .notFound("no webhook \(parameters["webhook_id"] ?? "")")
        }
        return uuid
    }
}
