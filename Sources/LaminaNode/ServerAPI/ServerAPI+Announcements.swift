import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

/// Announcements (`POST /announcements`): a message from a named system sender to a list of
/// users. As Layer had it, each recipient has one announcements conversation of their own
/// (they are its only participant; id derived from the user id, metadata
/// ``announcementsMarker``, not distinct); an announcement is one message in each recipient's,
/// sent from the system sender (SPEC §3.9). Devices get both through the sync protocol like
/// any conversation and message.
extension ServerAPI {
    /// The metadata key and value that mark a user's announcements conversation.
    static let announcementsMarker = (key: "lamina_announcements", value: "true")

    /// The id of `user`'s announcements conversation.
    static func announcementsConversation(of user: UserID) -> ConversationID {
        ConversationID(uuid: derivedUUID(Array("lamina announcements\u{0}\(user.rawValue)".utf8)))
    }

    /// The `recipients` of an announcement or a push-only notification: user ids (or identity
    /// ids), 1 to ``ServerAPILimits/maxAnnouncementRecipients``, in order, each once.
    static func recipients(_ body: [String: JSONValue]) throws -> [UserID] {
        guard let rawRecipients = body["recipients"] else { throw ServerAPIError.missingProperty("recipients") }
        guard let list = rawRecipients.array, !list.isEmpty, list.count <= ServerAPILimits.maxAnnouncementRecipients
        else {
            throw ServerAPIError.invalidProperty(
                "recipients",
                "recipients must be an array of 1 to \(ServerAPILimits.maxAnnouncementRecipients) user ids")
        }
        var recipients: [UserID] = []
        var seen = Set<UserID>()
        for item in list {
            let user = try ServerAPIRepresentation.user(item, property: "recipients")
            if seen.insert(user).inserted { recipients.append(user) }
        }
        return recipients
    }

    /// The id of the announcement's message to `user`.
    static func announcementMessage(_ announcement: UUID, to user: UserID) -> MessageID {
        MessageID(uuid: derivedUUID(withUnsafeBytes(of: announcement.uuid) { Array($0) } + Array(user.rawValue.utf8)))
    }

    /// POST /announcements: `recipients` (user ids, or identity ids in 3.0; 1 to
    /// ``ServerAPILimits/maxAnnouncementRecipients``), `sender.name`, `parts`, optional
    /// `notification`; 202 with the announcement. Everything is checked before anything is
    /// written; `If-None-Match` names the announcement (a repeat delivers nothing twice).
    func sendAnnouncement(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = try r.requestID() ?? UUID()
        let body = try ServerAPIJSON.object(r.http.body)
        let recipients = try Self.recipients(body)
        let sender = try Self.sender(body)
        guard sender.isSystemSender else {
            throw ServerAPIError.invalidProperty(
                "sender", "an announcement comes from a named system sender (sender.name)")
        }
        // The content is the same for every recipient; checked once, before any write.
        let (parts, push) = try Self.content(body, of: Self.announcementMessage(id, to: recipients[0]))
        let overrides = try Self.pushOverrides(body)
        do {
            try Message(
                conversationID: Self.announcementsConversation(of: recipients[0]), sender: sender, parts: parts,
                push: push
            ).validate()
        } catch {
            throw ServerAPIError.from(WireError(error))
        }

        let sentAt = Timestamp.now()
        for user in recipients {
            let conversation = try await announcementsConversation(of: user)
            let message = Self.announcementMessage(id, to: user)
            let (parts, push) = try Self.content(body, of: message)
            let frame = Frame.sendMessage(
                SendMessage(messageID: message, conversationID: conversation, parts: parts, push: push))
            _ = try await engine.runServerAPICommand(frame, as: sender, pushOverrides: overrides)
        }
        let representation = r.representation
        let object = AnnouncementObject(
            id: "layer:///announcements/\(id.uuidString.lowercased())",
            url: "\(representation.base)/announcements/\(id.uuidString.lowercased())",
            sent_at: ServerAPIJSON.date(millisecondsSince1970: sentAt.millisecondsSince1970),
            recipients: recipients.map {
                representation.version.usesIdentities ? ServerAPIRepresentation.identityID($0) : $0.rawValue
            },
            sender: representation.sender(sender),
            parts: representation.parts(parts, of: Self.announcementMessage(id, to: recipients[0])))
        return ServerAPIJSON.response(202, object)
    }

    /// `user`'s announcements conversation, created (as the user, through the engine) the
    /// first time; its devices learn of it at once.
    private func announcementsConversation(of user: UserID) async throws -> ConversationID {
        let id = Self.announcementsConversation(of: user)
        if try await engine.store.read({ r in try r.conversation(id) })?.isLive == true { return id }
        var metadata = Metadata()
        metadata.values[Self.announcementsMarker.key] = .string(Self.announcementsMarker.value)
        let frame = Frame.createConversation(
            CreateConversation(
                conversationID: id, participants: [user],
                options: ConversationOptions(isDistinct: false, metadata: metadata)))
        do {
            _ = try await engine.runServerAPICommand(frame, as: user)
        } catch let error as WireError where error.code == .idInUse {
            // Created meanwhile by a concurrent announcement, or deleted by the user.
            guard try await engine.store.read({ r in try r.conversation(id) })?.isLive == true else {
                throw ServerAPIError.objectDeleted("the announcements conversation of \(user.rawValue) was deleted")
            }
        }
        return id
    }
}
