import Foundation
import LaminaModel

/// A message ready to be sent: its client-chosen id, parts and push options. Made by
/// `LaminaClient.newMessage(parts:push:)`, sent by `LaminaClient.send(_:in:)`.
public struct MessageDraft: Hashable, Sendable, Identifiable {
    /// The message's id, chosen here: the node de-duplicates retries by it.
    public let id: MessageID
    public let parts: [MessagePart]
    public let push: PushConfiguration?
    /// The thread root this message replies to (a message of the same conversation that is no
    /// reply itself); nil for an ordinary message.
    public let replyTo: MessageID?
    /// The users the message mentions (SPEC §3.17): a recipient who hears only mentions in the
    /// conversation is notified of it. The node keeps only those who are participants.
    public let mentions: Set<UserID>

    init(
        id: MessageID, parts: [MessagePart], push: PushConfiguration?, replyTo: MessageID? = nil,
        mentions: Set<UserID> = []
    ) {
        self.id = id
        self.parts = parts
        self.push = push
        self.replyTo = replyTo
        self.mentions = mentions
    }
}

extension MessagePart {
    /// A part from a MIME type string and data (the docs' `messagePartWithMIMEType:data:`).
    /// Data of 2 KiB or less travels inline; larger data (up to 2 GiB) becomes rich content:
    /// the bytes are staged in `staging` (the sending client's `LaminaClient.staging`) with
    /// their size and SHA-256, and `LaminaClient.send` uploads them before the message goes out.
    /// Throws `.invalidMIMEType` for a type that is not `type/subtype`, `.partTooLarge` over 2 GiB.
    public static func with(mimeType: String, data: Data, staging: ContentStaging) throws(ClientError) -> MessagePart {
        let mime: MIMEType
        do { mime = try MIMEType(mimeType) } catch { throw ClientError(error) }
        if !needsRichContent(size: UInt64(data.count)) {
            do { return try MessagePart(mimeType: mime, bytes: [UInt8](data)) } catch { throw ClientError(error) }
        }
        return MessagePart(mimeType: mime, content: .external(try staging.stage(data: data)))
    }

    /// A part whose bytes are a file's (the docs' `messagePartWithMIMEType:stream:`): copied
    /// into `staging` in 1 MiB chunks while hashed, so a large file is never read whole.
    /// Files of 2 KiB or less travel inline. Later changes to the file do not change the part.
    public static func with(mimeType: String, fileURL: URL, staging: ContentStaging) throws(ClientError) -> MessagePart
    {
        let mime: MIMEType
        do { mime = try MIMEType(mimeType) } catch { throw ClientError(error) }
        guard fileURL.isFileURL else { throw ClientError(.invalidArgument, "\(fileURL) is not a file URL") }
        let size = (try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size] as? NSNumber)?.uint64Value
        guard let size else { throw ClientError(.notFound, "no readable file at \(fileURL.path)") }
        guard size <= Limits.maxPartBytes else {
            throw ClientError(
                .partTooLarge,
                "a part is at most \(Limits.maxPartBytes) bytes, \(fileURL.lastPathComponent) has \(size)")
        }
        if !needsRichContent(size: size) {
            let data: Data
            do { data = try Data(contentsOf: fileURL) } catch {
                throw ClientError(.notFound, "cannot read \(fileURL.path): \(error)")
            }
            if needsRichContent(size: UInt64(data.count)) {
                return try with(mimeType: mimeType, data: data, staging: staging)
            }  // it grew meanwhile
            do { return try MessagePart(mimeType: mime, bytes: [UInt8](data)) } catch { throw ClientError(error) }
        }
        return MessagePart(mimeType: mime, content: .external(try staging.stage(file: fileURL)))
    }

    /// A `text/plain` part (the docs' `messagePartWithText:`).
    public static func with(text: String) throws(ClientError) -> MessagePart {
        do { return try MessagePart(text: text) } catch { throw ClientError(error) }
    }
}
