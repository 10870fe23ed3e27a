/// Follows the frame headers of a connection's inbound HTTP/2 bytes ahead of nghttp2, to see
/// DATA frames nghttp2 discards without a callback: those for streams already closed (reset by
/// the node after refusing a request, or by the client) or never opened. Such frames make no
/// progress, so the connection counts them against ``HTTP2Settings/maxUnproductiveFramesPerSecond``
/// like empty DATA on an open stream: a flood after a refusal is cut the same way.
///
/// Only frame headers are read (9 bytes each); payloads are skipped. Malformed input is
/// nghttp2's to refuse. Package-visible for its fuzz check (`NodeFuzzChecks.checkHTTP2FrameScanner`).
package struct HTTP2FrameScanner {
    /// Bytes still to skip: the client preface (server role), then each frame's payload.
    private var skip: Int
    private var header: [UInt8] = []

    /// `server`: the byte stream starts with the 24-byte client connection preface.
    package init(server: Bool) {
        skip = server ? 24 : 0
        header.reserveCapacity(9)
    }

    /// Walks `bytes` (the next part of the stream); calls `data` with the stream id and flags
    /// of each DATA frame whose header completes in it.
    package mutating func scan(_ bytes: UnsafeRawBufferPointer, data: (_ streamID: Int32, _ flags: UInt8) -> Void) {
        var index = 0
        let count = bytes.count
        while index < count {
            if skip > 0 {
                let taken = min(skip, count - index)
                skip -= taken
                index += taken
                continue
            }
            if header.isEmpty && count - index >= 9 {
                frameHeader(UnsafeRawBufferPointer(rebasing: bytes[index..<index + 9]), data: data)
                index += 9
                continue
            }
            let taken = min(9 - header.count, count - index)
            header.append(contentsOf: bytes[index..<index + taken])
            index += taken
            if header.count == 9 {
                let complete = header
                header.removeAll(keepingCapacity: true)
                complete.withUnsafeBytes { frameHeader($0, data: data) }
            }
        }
    }

    private mutating func frameHeader(_ h: UnsafeRawBufferPointer, data: (Int32, UInt8) -> Void) {
        skip = Int(h[0]) << 16 | Int(h[1]) << 8 | Int(h[2])
        guard h[3] == 0 else { return }  // DATA
        let stream = Int32(h[5] & 0x7f) << 24 | Int32(h[6]) << 16 | Int32(h[7]) << 8 | Int32(h[8])
        data(stream, h[4])
    }
}
