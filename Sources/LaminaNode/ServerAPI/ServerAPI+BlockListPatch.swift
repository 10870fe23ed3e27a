import Foundation
import LaminaModel
import LaminaTransport

/// Version 3.0's form of block list changes: `PATCH /users/:owner_user_id` with Layer-Patch
/// operations on `blocks` (`add`, `remove`, `set`), each naming users by identity id
/// (`layer:///identities/<user id>`) or user id in `id` or `value` (a string or an array);
/// and the user's suspension: `set` of `suspended` to `true` or `false` (``UserSuspension``).
extension ServerAPI {
    /// The most operations one PATCH of a user carries.
    static let maxUserPatchOperations = 100

    /// Applies the operations in order (all are checked before any is applied); 204. A user
    /// naming themselves is accepted and changes nothing (as `POST …/blocks` does).
    func patchUser(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let owner = try r.userID()
        let contentType = r.http.headers["content-type"]?.split(separator: ";").first?.trimmingCharacters(
            in: .whitespaces
        ).lowercased()
        guard contentType == "application/vnd.layer-patch+json" else {
            throw ServerAPIError.invalidHeader(
                415, "Content-Type", "PATCH needs Content-Type: application/vnd.layer-patch+json")
        }
        let operations = try ServerAPIJSON.array(r.http.body)
        guard operations.count <= Self.maxUserPatchOperations else {
            throw ServerAPIError.invalidProperty(
                "operations", "a PATCH carries at most \(Self.maxUserPatchOperations) operations")
        }
        var edits: [(operation: String, users: [UserID])] = []
        var suspension: Bool?
        for (index, raw) in operations.enumerated() {
            guard let op = raw.object else {
                throw ServerAPIError.invalidProperty("[\(index)]", "each operation must be an object")
            }
            guard let operation = op["operation"]?.string else {
                throw ServerAPIError.missingProperty("[\(index)].operation")
            }
            guard let property = op["property"]?.string else {
                throw ServerAPIError.missingProperty("[\(index)].property")
            }
            if property == "suspended" {
                guard operation == "set" else {
                    throw ServerAPIError.invalidProperty(
                        "[\(index)].operation", "suspended takes set, not \(operation.prefix(40))")
                }
                guard case .bool(let value)? = op["value"] else {
                    throw ServerAPIError.invalidProperty("[\(index)].value", "suspended is set to true or false")
                }
                suspension = value
                continue
            }
            guard property == "blocks" else {
                throw ServerAPIError.invalidProperty(
                    "[\(index)].property", "a user's PATCH changes `blocks` or `suspended`")
            }
            guard ["add", "remove", "set"].contains(operation) else {
                throw ServerAPIError.invalidProperty(
                    "[\(index)].operation", "blocks take add, remove or set, not \(operation.prefix(40))")
            }
            guard let value = op["id"] ?? op["value"] else { throw ServerAPIError.missingProperty("[\(index)].id") }
            let items = value.array ?? [value]
            guard items.count <= ServerAPILimits.maxBlocksPerUser else {
                throw ServerAPIError.invalidProperty(
                    "[\(index)].value", "at most \(ServerAPILimits.maxBlocksPerUser) users per operation")
            }
            var users: [UserID] = []
            for item in items { users.append(try ServerAPIRepresentation.user(item, property: "[\(index)].id")) }
            edits.append((operation, users))
        }
        for edit in edits {
            switch edit.operation {
            case "add":
                for user in edit.users { try await block(user, by: owner) }
            case "remove":
                for user in edit.users { _ = try await engine.unblock(user, by: owner) }
            default:
                let wanted = Set(edit.users)
                let current = try await engine.store.read { reader in try reader.blocks(of: owner) }
                for user in current where !wanted.contains(user) { _ = try await engine.unblock(user, by: owner) }
                for user in edit.users where !current.contains(user) { try await block(user, by: owner) }
            }
        }
        if let suspension { try await engine.setSuspended(suspension, user: owner) }
        return HTTPResponse(status: 204)
    }

    /// GET /users/:user_id: the user's suspension status (Layer's "Get suspension status"):
    /// `{"id", "user_id", "suspended"}`.
    func getUser(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        return ServerAPIJSON.response(
            200,
            UserStatusObject(
                id: ServerAPIRepresentation.identityID(user), user_id: user.rawValue,
                suspended: try await engine.isSuspended(user)))
    }

    /// `blocker` blocks `blocked` (nothing when they are the same user, or already blocked);
    /// 422 when the list is full.
    func block(_ blocked: UserID, by blocker: UserID) async throws {
        switch try await engine.block(blocked, by: blocker, limit: ServerAPILimits.maxBlocksPerUser) {
        case .added, .alreadyBlocked, .ownself: return
        case .full:
            throw ServerAPIError.invalidProperty(
                "user_id", "\(blocker.rawValue) blocks \(ServerAPILimits.maxBlocksPerUser) users already (the most)")
        }
    }
}

/// `GET /users/:user_id`.
struct UserStatusObject: Encodable, Sendable {
    var id: String
    var user_id: String
    var suspended: Bool
}
