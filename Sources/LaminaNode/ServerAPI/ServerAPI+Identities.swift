import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

/// Identities (`/users/:user_id/identity`) and a user's sessions (`/users/:user_id/sessions`).
extension ServerAPI {
    /// The request's representation with the identities of `users` loaded (2.0 and 3.0 show
    /// users as identities; every version shows the identity routes' identities whole).
    func representation(
        _ r: ServerAPIRequest, users: some Collection<UserID> & Sendable, evenAsUserIDs: Bool = false
    ) async throws -> ServerAPIRepresentation {
        var representation = r.representation
        guard representation.version.usesIdentities || evenAsUserIDs, !users.isEmpty else { return representation }
        representation.identities = try await engine.store.read { reader in try reader.identities(of: users) }
        return representation
    }

    /// GET: the identity (200) with the user's `presence` as others see it (status and
    /// `last_seen_at`, kept across restarts) when the node knows it, or 404 when none was set.
    func getIdentity(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        guard try await engine.store.read({ reader in try reader.identity(of: user) }) != nil else {
            throw ServerAPIError.notFound("no identity of \(user.rawValue)")
        }
        var object = try await representation(r, users: [user], evenAsUserIDs: true).identity(user)
        object.presence = try await engine.displayedPresence(of: [user], as: nil)[user].map(PresenceObject.init)
        return ServerAPIJSON.response(200, object)
    }

    /// POST: creates the identity (201 with it); 409 when one exists.
    func createIdentity(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let identity = try Self.identity(from: try ServerAPIJSON.object(r.http.body))
        let (created, changes) = try await engine.store.write { [engine] tx -> (Bool, [FeedChange]) in
            guard try tx.read.identity(of: user) == nil else { return (false, []) }
            return try engine.storeIdentity(identity, of: user, in: tx)
        }
        if created {
            engine.publish(changes)
            engine.replicationSignal.notify()
        }
        guard created else {
            throw ServerAPIError.conflict(
                "\(user.rawValue) has an identity; PUT replaces it, PATCH edits it",
                data: ["id": .string(ServerAPIRepresentation.identityID(user))])
        }
        return ServerAPIJSON.response(
            201, try await representation(r, users: [user], evenAsUserIDs: true).identity(user))
    }

    /// PUT: sets the whole identity (204).
    func replaceIdentity(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let identity = try Self.identity(from: try ServerAPIJSON.object(r.http.body))
        try await engine.setIdentity(identity, of: user)
        return HTTPResponse(status: 204)
    }

    /// PATCH (`application/vnd.layer-patch+json`): `set` or `delete` of a property or of
    /// `metadata.<key>` (204); 404 when no identity was set.
    func patchIdentity(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let contentType = r.http.headers["content-type"]?.split(separator: ";").first?.trimmingCharacters(
            in: .whitespaces
        ).lowercased()
        guard contentType == "application/vnd.layer-patch+json" else {
            throw ServerAPIError.invalidHeader(
                415, "Content-Type", "PATCH needs Content-Type: application/vnd.layer-patch+json")
        }
        let edits = try ServerAPIJSON.array(r.http.body).enumerated().map { (index, raw) throws(ServerAPIError) in
            try Self.edit(raw, index)
        }
        let (found, changes) = try await engine.store.write { [engine] tx -> (Bool, [FeedChange]) in
            guard var identity = try tx.read.identity(of: user) else { return (false, []) }
            for edit in edits { edit.apply(to: &identity) }
            try Self.check(identity)
            return try engine.storeIdentity(identity, of: user, in: tx)
        }
        if found {
            engine.publish(changes)
            engine.replicationSignal.notify()
        }
        guard found else { throw ServerAPIError.notFound("no identity of \(user.rawValue)") }
        return HTTPResponse(status: 204)
    }

    /// DELETE: removes the identity (204); 404 when none was set.
    func deleteIdentity(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        guard try await engine.setIdentity(nil, of: user) else {
            throw ServerAPIError.notFound("no identity of \(user.rawValue)")
        }
        return HTTPResponse(status: 204)
    }

    /// DELETE /users/:user_id/sessions: revokes every session of the user; its devices'
    /// open streams end with `session-revoked` and must authenticate again (204).
    func revokeSessions(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        try await engine.revokeSessions(of: user)
        return HTTPResponse(status: 204)
    }

    // MARK: parsing

    /// An identity from a POST or PUT body: the string properties and `metadata`.
    static func identity(from body: [String: JSONValue]) throws(ServerAPIError) -> StoredIdentity {
        var identity = StoredIdentity()
        for (key, value) in body {
            if key == "metadata" {
                guard let map = value.object else {
                    throw .invalidProperty("metadata", "metadata is an object of strings")
                }
                for (k, v) in map { identity.metadata[k] = try metadataValue(v, k) }
            } else if StoredIdentity.fields.contains(key) {
                if value.isNull { continue }
                guard let text = value.string else { throw .invalidProperty(key, "\(key) is a string") }
                identity.values[key] = text
            } else {
                throw .invalidProperty(
                    key,
                    "an identity has no property \(key) (it has \(StoredIdentity.fields.joined(separator: ", ")), metadata)"
                )
            }
        }
        try check(identity)
        return identity
    }

    /// One PATCH operation on an identity, parsed before the write.
    enum IdentityEdit: Sendable {
        case setField(String, String)
        case deleteField(String)
        case setMetadata(String, String)
        case deleteMetadata(String)
        case replaceMetadata([String: String])

        func apply(to identity: inout StoredIdentity) {
            switch self {
            case .setField(let key, let value): identity.values[key] = value
            case .deleteField(let key): identity.values[key] = nil
            case .setMetadata(let key, let value): identity.metadata[key] = value
            case .deleteMetadata(let key): identity.metadata[key] = nil
            case .replaceMetadata(let map): identity.metadata = map
            }
        }
    }

    static func edit(_ raw: JSONValue, _ index: Int) throws(ServerAPIError) -> IdentityEdit {
        guard let op = raw.object else { throw .invalidProperty("[\(index)]", "each operation must be an object") }
        guard let operation = op["operation"]?.string else { throw .missingProperty("[\(index)].operation") }
        guard let property = op["property"]?.string else { throw .missingProperty("[\(index)].property") }
        let metadataKey = property.hasPrefix("metadata.") ? String(property.dropFirst("metadata.".count)) : nil
        guard metadataKey != nil || property == "metadata" || StoredIdentity.fields.contains(property) else {
            throw .invalidProperty("[\(index)].property", "an identity has no property \(property)")
        }
        switch operation {
        case "set":
            guard let value = op["value"] else { throw .missingProperty("[\(index)].value") }
            if let metadataKey { return .setMetadata(metadataKey, try metadataValue(value, metadataKey)) }
            if property == "metadata" {
                guard let map = value.object else {
                    throw .invalidProperty("[\(index)].value", "metadata is an object of strings")
                }
                var out: [String: String] = [:]
                for (k, v) in map { out[k] = try metadataValue(v, k) }
                return .replaceMetadata(out)
            }
            guard let text = value.string else { throw .invalidProperty("[\(index)].value", "\(property) is a string") }
            return .setField(property, text)
        case "delete":
            if let metadataKey { return .deleteMetadata(metadataKey) }
            return property == "metadata" ? .replaceMetadata([:]) : .deleteField(property)
        default:
            throw .invalidProperty("[\(index)].operation", "an identity takes set and delete, not \(operation)")
        }
    }

    static func metadataValue(_ value: JSONValue, _ key: String) throws(ServerAPIError) -> String {
        guard let text = value.string else {
            throw .invalidProperty("metadata.\(key)", "identity metadata values are strings")
        }
        return text
    }

    /// The identity limits (``ServerAPILimits``), checked before anything is stored.
    static func check(_ identity: StoredIdentity) throws(ServerAPIError) {
        for (key, value) in identity.values where value.utf8.count > ServerAPILimits.maxIdentityStringBytes {
            throw .invalidProperty(key, "\(key) is at most \(ServerAPILimits.maxIdentityStringBytes) UTF-8 bytes")
        }
        guard identity.metadata.count <= ServerAPILimits.maxIdentityMetadataEntries else {
            throw .invalidProperty(
                "metadata", "metadata holds at most \(ServerAPILimits.maxIdentityMetadataEntries) entries")
        }
        for (key, value) in identity.metadata {
            guard !key.isEmpty, key.utf8.count <= ServerAPILimits.maxIdentityMetadataKeyBytes else {
                throw .invalidProperty(
                    "metadata", "a metadata key is 1...\(ServerAPILimits.maxIdentityMetadataKeyBytes) UTF-8 bytes")
            }
            guard value.utf8.count <= ServerAPILimits.maxIdentityStringBytes else {
                throw .invalidProperty(
                    "metadata.\(key)",
                    "a metadata value is at most \(ServerAPILimits.maxIdentityStringBytes) UTF-8 bytes")
            }
        }
    }
}
