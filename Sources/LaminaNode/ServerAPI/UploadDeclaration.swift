import Foundation
import LaminaModel
import LaminaTransport

/// What a `POST /content` declares (the Server API's and the Client API's): the size in
/// `Upload-Content-Length`, checked against the part limit before anything is stored, and a
/// well-formed `Upload-Content-Type` if there is one.
enum UploadDeclaration {
    /// The declared size in bytes; 400 for a missing or malformed header, 413 past the limit.
    static func size(of request: HTTPRequest) throws -> UInt64 {
        guard let raw = request.headers["upload-content-length"] else {
            throw ServerAPIError.invalidHeader(
                400, "Upload-Content-Length",
                "an Upload-Content-Length header (the content's size in bytes) is required")
        }
        guard let size = UInt64(raw.trimmingCharacters(in: .whitespaces)), size > 0 else {
            throw ServerAPIError.invalidHeader(
                400, "Upload-Content-Length", "Upload-Content-Length must be a positive decimal number of bytes")
        }
        guard size <= Limits.maxPartBytes else { throw ServerAPIError.contentTooLarge(size) }
        if let type = request.headers["upload-content-type"] {
            do { _ = try MIMEType(type) } catch {
                throw ServerAPIError.invalidHeader(
                    400, "Upload-Content-Type", "Upload-Content-Type must be a MIME type (type/subtype)")
            }
        }
        return size
    }
}
