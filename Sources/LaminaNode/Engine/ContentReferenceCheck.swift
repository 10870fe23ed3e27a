import LaminaModel
import LaminaStore
import LaminaWire

/// The check a message's content references pass where the send enters, for conversations
/// (SPEC §6.2) and channels (§6.8) alike (Protocol/CONTENT.md §7): each referenced content is
/// complete (`content-not-ready`), was uploaded by the sender or, through the Server API, by the
/// app's backend (§10) (`forbidden`), and has the reference's size and digest
/// (`invalid-content-reference`).
enum ContentReferenceCheck {
    static func check(
        _ parts: [MessagePart], sender: UserID, contentOwner: UserID?, in reader: StorageReader
    ) throws -> WireError? {
        for part in parts {
            guard case .external(let reference) = part.content else { continue }
            guard let upload = try reader.upload(reference.id), upload.state == .complete else {
                return WireError(.contentNotReady, "content \(reference.id) is not completely uploaded")
            }
            guard upload.owner == sender || (contentOwner != nil && upload.owner == contentOwner) else {
                return WireError(.forbidden, "content \(reference.id) was uploaded by another user")
            }
            guard upload.declaredSize == reference.size, upload.sha256 == reference.sha256 else {
                return WireError(
                    .invalidContentReference,
                    "the reference to \(reference.id) declares \(reference.size) bytes and another digest than the upload (\(upload.declaredSize) bytes)"
                )
            }
        }
        return nil
    }
}
