import Foundation
import LaminaModel
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore

/// A content of `size` bytes generated on the fly (a random 1 MiB block, each copy stamped with
/// its index), so a 1 GiB upload is never held in memory.
struct GeneratedContent: Sendable {
    let size: UInt64
    let block: [UInt8]

    init(size: UInt64) throws {
        self.size = size
        self.block = try SecureRandom.bytes(1 << 20)
    }

    /// Bytes `[offset, offset + count)`; `count` may not cross a block boundary.
    func chunk(at offset: UInt64, count: Int) -> ByteBuffer {
        let blockIndex = offset >> 20
        let within = Int(offset & ((1 << 20) - 1))
        precondition(within + count <= block.count)
        var buffer = ByteBuffer(bytes: block[within..<(within + count)])
        // Stamp the block index into its first 8 bytes (when they are in this chunk).
        for i in 0..<8 where within <= i && i < within + count {
            buffer.setInteger(UInt8(truncatingIfNeeded: blockIndex >> (8 * UInt64(i))), at: i - within)
        }
        return buffer
    }

    /// Chunks of at most `chunkSize` bytes in order.
    func forEachChunk(_ chunkSize: Int, _ body: (ByteBuffer) throws -> Void) rethrows {
        var offset: UInt64 = 0
        while offset < size {
            let within = Int(offset & ((1 << 20) - 1))
            let count = Int(min(UInt64(min(chunkSize, (1 << 20) - within)), size - offset))
            try body(chunk(at: offset, count: count))
            offset += UInt64(count)
        }
    }

    func sha256() throws -> [UInt8] {
        let hasher = try SHA256Hasher()
        try forEachChunk(1 << 20) { try hasher.update($0) }
        return try hasher.finalize()
    }
}

/// Receives a download: counts bytes and hashes them on a separate queue (not on the event
/// loop the sync stream shares), pausing the stream while the hashing queue is behind.
final class DownloadSink: TransportStreamDelegate, @unchecked Sendable {
    private let hasher: SHA256Hasher
    private let queue = DispatchQueue(label: "lamina.bench.download-hash")
    private let backlog = NIOLockedValueBox(0)
    private let maxBacklog = 8 << 20
    private var paused = false
    private(set) var received: UInt64 = 0
    private(set) var status: String?
    let done: EventLoopPromise<(status: String?, bytes: UInt64, sha256: [UInt8])>

    init(eventLoop: EventLoop) throws {
        hasher = try SHA256Hasher()
        done = eventLoop.makePromise()
    }

    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) { status = headers[":status"] }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        received += UInt64(data.readableBytes)
        let count = data.readableBytes
        let over = backlog.withLockedValue { b -> Bool in
            b += count
            return b > maxBacklog
        }
        if over && !paused {
            paused = true
            stream.pauseInbound()
        }
        queue.async {
            try? self.hasher.update(data)
            let drained = self.backlog.withLockedValue { b -> Bool in
                b -= count
                return b <= (8 << 20) / 2
            }
            if drained {
                stream.eventLoop.execute {
                    if self.paused {
                        self.paused = false
                        stream.resumeInbound()
                    }
                }
            }
        }
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        let status = self.status
        let bytes = received
        queue.async {
            do { self.done.succeed((status, bytes, try self.hasher.finalize())) } catch { self.done.fail(error) }
        }
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        if let error { done.fail(error) }
    }
}
