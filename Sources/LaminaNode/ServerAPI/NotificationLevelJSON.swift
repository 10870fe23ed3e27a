import Foundation
import LaminaMerge
import LaminaModel
import LaminaTransport
import LaminaWire

/// A user's notification level of a conversation over HTTP (a Lamina extension of Layer's
/// APIs, SPEC §6.10): `GET`/`PUT` `…/conversations/{conversation_id}/notification_level` in the
/// Server API (on behalf of a user) and the Client API (the session's user).
/// Body of PUT: `{"level": "all" | "mentions" | "none", "until": "<ISO 8601>" | null}`;
/// answer of both: ``NotificationLevelObject``.
struct NotificationLevelObject: Encodable {
    /// `layer:///conversations/<uuid>`.
    var conversation_id: String
    /// The level as set (`all` when never set).
    var level: String
    /// When it ends (ISO 8601, UTC, milliseconds); null: no end.
    var until: String?
    /// The level in force now (`all` once `until` has passed).
    var effective_level: String

    init(_ id: ConversationID, _ setting: NotificationSetting, now: Timestamp = .now()) {
        conversation_id = ServerAPIRepresentation.conversationID(id)
        level = Self.name(setting.current?.level ?? .all)
        until = setting.current?.until.map { ServerAPIJSON.date(millisecondsSince1970: Int64(clamping: $0)) }
        effective_level = Self.name(setting.level(now: UInt64(clamping: now.millisecondsSince1970)))
    }

    private enum CodingKeys: String, CodingKey { case conversation_id, level, until, effective_level }

    /// Every property, `until` as null when the level has no end.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(conversation_id, forKey: .conversation_id)
        try c.encode(level, forKey: .level)
        try c.encode(until, forKey: .until)
        try c.encode(effective_level, forKey: .effective_level)
    }

    static func name(_ level: NotificationLevel) -> String {
        switch level {
        case .all: "all"
        case .mentions: "mentions"
        case .none: "none"
        }
    }

    /// The level and end a PUT body asks for; `invalid_property` for anything else.
    static func parse(_ body: [String: JSONValue]) throws(ServerAPIError) -> (NotificationLevel, Timestamp?) {
        guard let raw = body["level"] else { throw .missingProperty("level") }
        let level: NotificationLevel
        switch raw.string {
        case "all": level = .all
        case "mentions": level = .mentions
        case "none": level = .none
        default: throw .invalidProperty("level", "level must be \"all\", \"mentions\" or \"none\"")
        }
        guard let until = body["until"], !until.isNull else { return (level, nil) }
        let styles = [Date.ISO8601FormatStyle(includingFractionalSeconds: true), Date.ISO8601FormatStyle()]
        guard let text = until.string, text.utf8.count <= 64,
            let date = styles.lazy.compactMap({ try? $0.parse(text) }).first,
            date.timeIntervalSince1970 >= 0, date.timeIntervalSince1970 < 1e13
        else {
            throw .invalidProperty("until", "until must be an ISO 8601 date-time after 1970, or null")
        }
        return (level, Timestamp(date))
    }
}

extension ServerAPI {
    /// GET /apps/:app_id/users/:user_id/conversations/:conversation_id/notification_level.
    func getNotificationLevel(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let (user, named) = (try r.userID(), try r.conversationID())
        do {
            let (id, setting) = try await engine.notificationSetting(of: user, in: named)
            return ServerAPIJSON.response(200, NotificationLevelObject(id, setting))
        } catch let error as WireError { throw ServerAPIError.from(error) }
    }

    /// PUT …/notification_level: sets the user's level (as SET_NOTIFICATION_LEVEL from one of
    /// their devices would); 200 with the level now held.
    func putNotificationLevel(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let (user, named) = (try r.userID(), try r.conversationID())
        let (level, until) = try NotificationLevelObject.parse(try ServerAPIJSON.object(r.http.body))
        do {
            let id = try await engine.setNotificationLevel(level, until: until, of: user, in: named)
            let (_, setting) = try await engine.notificationSetting(of: user, in: id)
            return ServerAPIJSON.response(200, NotificationLevelObject(id, setting))
        } catch let error as WireError { throw ServerAPIError.from(error) }
    }
}

extension ClientAPI {
    /// GET /conversations/:conversation_id/notification_level: the session user's level.
    func getNotificationLevel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        do {
            let (id, setting) = try await engine.notificationSetting(of: user, in: try r.conversationID())
            return ServerAPIJSON.response(200, NotificationLevelObject(id, setting))
        } catch let error as WireError { throw ServerAPIError.from(error) }
    }

    /// PUT /conversations/:conversation_id/notification_level: sets the session user's level.
    func putNotificationLevel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let (level, until) = try NotificationLevelObject.parse(try r.object())
        do {
            let id = try await engine.setNotificationLevel(level, until: until, of: user, in: try r.conversationID())
            let (_, setting) = try await engine.notificationSetting(of: user, in: id)
            return ServerAPIJSON.response(200, NotificationLevelObject(id, setting))
        } catch let error as WireError { throw ServerAPIError.from(error) }
    }
}
