import Foundation
import LaminaClient
import LaminaModel

/// A message part from a file on disk, for `lamina send --file`.
public enum FilePart {
    /// MIME types by lowercase file extension; anything else is `application/octet-stream`.
    public static let typesByExtension: [String: String] = [
        "txt": "text/plain", "md": "text/markdown", "json": "application/json", "pdf": "application/pdf",
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "heic": "image/heic",
        "mp4": "video/mp4", "mov": "video/quicktime", "m4a": "audio/mp4", "mp3": "audio/mpeg", "zip": "application/zip",
    ]

    /// The MIME type `lamina send` gives `path` when none is named.
    public static func mimeType(forPath path: String) -> String {
        typesByExtension[URL(fileURLWithPath: path).pathExtension.lowercased()] ?? "application/octet-stream"
    }

    /// Checks that `path` names a file (before connecting: bad input fails at once).
    public static func check(path: String) throws(ClientError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw ClientError(.invalidArgument, "no file at \(path)")
        }
    }

    /// The part for the file at `path`: inline up to 2 KiB, else staged as rich content in
    /// `staging` (the sending client's; copied, so later edits of the file do not change the message).
    public static func part(path: String, mimeType: String?, staging: ContentStaging) throws(ClientError) -> MessagePart
    {
        try check(path: path)
        return try MessagePart.with(
            mimeType: mimeType ?? Self.mimeType(forPath: path), fileURL: URL(fileURLWithPath: path), staging: staging)
    }
}
