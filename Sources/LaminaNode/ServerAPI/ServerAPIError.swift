import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

/// Layer's Platform API error object: `{"id", "code", "message", "url", "data"}` with the
/// HTTP status it goes with. Ids and codes are Layer's.
public struct ServerAPIError: Error, Sendable {
    public var status: Int
    public var id: String
    public var code: Int
    public var message: String
    /// Extra fields (`property`, the existing conversation of a 409, …).
    public var data: [String: JSONValue]?
    /// Extra response headers (`retry-after`).
    public var headers: [(String, String)] = []

    public init(_ status: Int, _ id: String, _ code: Int, _ message: String, data: [String: JSONValue]? = nil) {
        self.status = status
        self.id = id
        self.code = code
        self.message = message
        self.data = data
    }

    static func authenticationRequired(_ message: String) -> Self { .init(401, "authentication_required", 4, message) }
    static func rateLimitExceeded(_ seconds: Int) -> Self {
        var e = Self(429, "rate_limit_exceeded", 7, "too many requests for this token; retry after \(seconds) s")
        e.headers = [("retry-after", "\(seconds)")]
        return e
    }
    static func invalidRequest(_ message: String) -> Self { .init(400, "invalid_request", 10, message) }
    static func accessDenied(_ message: String) -> Self { .init(403, "access_denied", 11, message) }
    static func invalidAppID(_ message: String) -> Self { .init(404, "invalid_app_id", 2, message) }
    static func notFound(_ message: String) -> Self { .init(404, "not_found", 102, message) }
    static func objectDeleted(_ message: String) -> Self { .init(410, "object_deleted", 103, message) }
    static func missingProperty(_ property: String) -> Self {
        .init(
            422, "missing_property", 104, "the property \(property) is required", data: ["property": .string(property)])
    }
    static func invalidProperty(_ property: String, _ message: String) -> Self {
        .init(422, "invalid_property", 105, message, data: ["property": .string(property)])
    }
    static func idInUse(_ message: String) -> Self { .init(409, "id_in_use", 106, message) }
    static func invalidHeader(_ status: Int, _ header: String, _ message: String) -> Self {
        .init(status, "invalid_header", 107, message, data: ["header": .string(header)])
    }
    static func conflict(_ message: String, data: [String: JSONValue]) -> Self {
        .init(409, "conflict", 108, message, data: data)
    }
    static func invalidEndpoint(_ message: String) -> Self { .init(404, "invalid_endpoint", 109, message) }
    static func methodNotAllowed(_ message: String) -> Self { .init(405, "method_not_allowed", 110, message) }
    static func requestTooLarge(_ max: Int) -> Self {
        .init(413, "request_too_large", 111, "the request body is larger than \(max) bytes")
    }
    /// Content over the size limit (`Upload-Content-Length` over 2 GiB).
    static func contentTooLarge(_ size: UInt64) -> Self {
        .init(
            413, "request_too_large", 111, "content is at most \(Limits.maxPartBytes) bytes, \(size) declared",
            data: ["header": "Upload-Content-Length", "max": .integer(Int64(Limits.maxPartBytes))])
    }
    /// The app's stored content would exceed the node's content quota (CONTENT.md §7, §10).
    static func quotaExceeded(used: UInt64, size: UInt64, quota: UInt64) -> Self {
        .init(
            507, "quota_exceeded", 113,
            "\(used) bytes of content stored or reserved, \(size) more would exceed the quota of \(quota)",
            data: ["used": .integer(Int64(used)), "quota": .integer(Int64(quota))])
    }
    /// Another request works on the content, or too many uploads at once (retry after `seconds`).
    static func busy(_ seconds: Int) -> Self {
        var e = Self(
            429, "rate_limit_exceeded", 7,
            "another upload works on this content, or too many uploads at once; retry after \(seconds) s")
        e.headers = [("retry-after", "\(seconds)")]
        return e
    }
    static func serviceUnavailable(_ message: String) -> Self { .init(503, "service_unavailable", 1, message) }
    static func internalError(_ message: String) -> Self { .init(500, "internal_server_error", 12, message) }

    /// The engine's refusal of a command, as the Platform API reports it.
    static func from(_ error: WireError) -> Self {
        switch error.code {
        case .notFound: return .notFound(error.reason)
        case .notAParticipant, .removedParticipant, .forbidden: return .accessDenied(error.reason)
        case .idInUse: return .idInUse(error.reason)
        case .invalidUserID, .noParticipants, .tooManyParticipants:
            return .invalidProperty("participants", error.reason)
        case .invalidMetadata: return .invalidProperty("metadata", error.reason)
        case .invalidReactionKey: return .invalidProperty("key", error.reason)
        case .noParts, .tooManyParts, .partTooLarge, .inlineTooLarge, .invalidMIMEType, .duplicatePart,
            .invalidContentReference:
            return .invalidProperty("parts", error.reason)
        case .contentNotReady: return .conflict(error.reason, data: ["property": "parts"])
        case .invalidPushConfiguration: return .invalidProperty("notification", error.reason)
        case .replyTargetNotFound, .nestedReply: return .invalidProperty("reply_to", error.reason)
        case .invalidArgument, .invalidIdentifier: return .invalidRequest(error.reason)
        case .overloaded: return .serviceUnavailable(error.reason)
        case .shuttingDown: return .serviceUnavailable(error.reason)
        default: return .internalError(error.reason)
        }
    }

    /// The JSON body (as `contentType`: the webhooks API answers application/json).
    func response(base: String, contentType: String = ServerAPIJSON.contentType) -> HTTPResponse {
        ServerAPIJSON.response(
            status, ErrorObject(id: id, code: code, message: message, url: "\(base)/errors#\(id)", data: data),
            contentType: contentType, extraHeaders: headers)
    }

    /// Layer's error object; `data` is left out when there is none.
    struct ErrorObject: Encodable {
        var id: String
        var code: Int
        var message: String
        var url: String
        var data: [String: JSONValue]?
    }
}
