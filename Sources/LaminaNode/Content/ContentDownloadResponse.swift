import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

extension ContentService {
    /// The HTTP answer carrying complete content (the Server API's and the Client API's
    /// download URLs): its bytes read from the file chunk by chunk as the client takes them
    /// (``ContentServiceSettings/downloadChunkBytes`` at a time), over HTTP/1.1 or HTTP/2.
    func downloadResponse(_ upload: ContentUpload) -> HTTPResponse {
        let files = self.files
        let pool = threadPool
        let chunkBytes = settings.downloadChunkBytes
        let size = upload.declaredSize
        let id = upload.id
        let body = HTTPBodyStream(contentLength: Int(size)) { writer in
            // Opened here, so a response the client never waited for holds no file.
            let (fd, held) = try await pool.runIfActive { try files.openComplete(id) }
            defer { ContentFiles.closeFile(fd) }
            guard held == size else {
                throw ContentFileError(reason: "content \(id) holds \(held) bytes, recorded \(size)")
            }
            let allocator = ByteBufferAllocator()
            var offset: UInt64 = 0
            while offset < size {
                let at = offset
                let count = Int(min(UInt64(chunkBytes), size - at))
                let chunk = try await pool.runIfActive {
                    try ContentFiles.readChunk(fd, at: at, count: count, allocator: allocator)
                }
                guard chunk.readableBytes == count else { throw ContentFileError(reason: "content \(id) ended early") }
                try await writer.write(chunk)
                offset += UInt64(count)
            }
        }
        return HTTPResponse(
            status: 200,
            headers: [
                ("content-type", "application/octet-stream"), ("etag", "\"\(Hex.encode(upload.sha256))\""),
                ("lamina-content-sha256", Hex.encode(upload.sha256)),
            ],
            stream: body)
    }
}
