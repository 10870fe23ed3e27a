import Foundation
import LaminaModel
import LaminaTransport

/// Version 3.0's form of block list changes: `PATCH /users/:owner_user_id` with Layer-Patch
/// operations on `blocks` (`add`, `remove`, `set`), each naming users by identity id
/// (`layer:///identities/<user id>`) or user id in `id` or `value` (a string or an array).
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
            guard property == "blocks" else {
                throw ServerAPIError.invalidProperty(
                    "[\(index)].property", "a user's PATCH changes `blocks` (suspension is not served)")
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
        return HTTPResponse(status: 204)
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
