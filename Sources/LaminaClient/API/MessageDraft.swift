import Foundation
import LaminaModel

/// A message ready to be sent: its client-chosen id, parts and push options. Made by
/// `LaminaClient.newMessage(parts:push:)`, sent by `LaminaClient.send(_:in:)`.
public struct MessageDraft: Hashable, Sendable, Identifiable {
    /// The message's id, chosen here: the node de-duplicates retries by it.
    public let id: MessageID
    public let parts: [MessagePart]
    public let push: PushConfiguration?

    init(id: MessageID, parts: [MessagePart], push: PushConfiguration?) {
        self.id = id
        self.parts = parts
        self.push = push
    }
}

extension MessagePart {
    /// A part from a MIME type string and data (the docs' `messagePartWithMIMEType:data:`).
    /// Throws `.invalidMIMEType` for a type that is not `type/subtype`, and
    /// `.inlineTooLarge` for data over 2 KiB (rich content upload is not in this SDK yet).
    public static func with(mimeType: String, data: Data) throws(ClientError) -> MessagePart {
        do {
            return try MessagePart(mimeType: MIMEType(mimeType), bytes: [UInt8](data))
        } catch {
            throw ClientError(error)
        }
    }

    /// A `text/plain` part (the docs' `messagePartWithText:`).
    public static func with(text: String) throws(ClientError) -> MessagePart {
        do { return try MessagePart(text: text) } catch { throw ClientError(error) }
    }
}
