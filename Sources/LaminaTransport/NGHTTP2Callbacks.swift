import CNghttp2

/// The nghttp2 callback table, built once per process. Every callback finds its
/// ``HTTP2ConnectionHandler`` through the session user data and never flushes.
nonisolated(unsafe) let nghttp2Callbacks: OpaquePointer = {
    var callbacks: OpaquePointer? = nil
    guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
        fatalError("nghttp2 could not allocate its callback table")
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameRecv)
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunkRecv)
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
    return callbacks
}()

/// Runs `body` with the handler behind the session user data, without retain/release
/// (the handler owns the session and outlives every callback).
@inline(__always)
private func withHandler<T>(_ userData: UnsafeMutableRawPointer?, _ body: (HTTP2ConnectionHandler) -> T) -> T {
    Unmanaged<HTTP2ConnectionHandler>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    return withHandler(userData) { $0.onBeginHeaders(frame) }
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, let name, let value else { return 0 }
    return withHandler(userData) {
        $0.onHeader(
            frame, name: UnsafeBufferPointer(start: name, count: nameLength),
            value: UnsafeBufferPointer(start: value, count: valueLength))
    }
}

private let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    return withHandler(userData) { $0.onFrameRecv(frame) }
}

private let onDataChunkRecv: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    guard let data else { return 0 }
    return withHandler(userData) {
        $0.onDataChunk(streamID: streamID, UnsafeRawBufferPointer(start: data, count: length))
    }
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    withHandler(userData) { $0.onStreamClose(streamID: streamID, errorCode: errorCode) }
}

/// Data source of every outbound body: copies from the stream's queue, defers when empty.
let nghttp2DataRead: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
    guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    return withHandler(userData) {
        $0.readOutbound(
            streamID: streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length), flags: flags)
    }
}
