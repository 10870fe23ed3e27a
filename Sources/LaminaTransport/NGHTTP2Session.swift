import CNghttp2

/// Owns one `nghttp2_session` and its option object; nothing outside sees the pointers.
/// All calls happen on the owning channel's event loop.
final class NGHTTP2Session {
    let raw: OpaquePointer
    private(set) var isClosed = false

    enum Role { case server, client }

    /// Callbacks find `owner` through the session user data (unretained: the owner outlives
    /// the session, which it deletes in `close()`).
    init(role: Role, owner: HTTP2ConnectionHandler, settings: HTTP2Settings) throws {
        var option: OpaquePointer? = nil
        guard nghttp2_option_new(&option) == 0, let option else {
            throw TransportError(.http2Protocol, "nghttp2_option_new failed")
        }
        defer { nghttp2_option_del(option) }
        // Window updates only once the layer above has taken the bytes: flow control is backpressure.
        nghttp2_option_set_no_auto_window_update(option, 1)
        // Flood protections: nghttp2's defaults kept or tightened.
        nghttp2_option_set_max_outbound_ack(option, 1000)
        nghttp2_option_set_max_settings(option, 32)
        nghttp2_option_set_max_continuations(option, 8)
        nghttp2_option_set_stream_reset_rate_limit(option, 1000, 33)
        nghttp2_option_set_max_deflate_dynamic_table_size(option, 4096)
        var session: OpaquePointer? = nil
        let userData = Unmanaged.passUnretained(owner).toOpaque()
        let rv: Int32
        switch role {
        case .server: rv = nghttp2_session_server_new2(&session, nghttp2Callbacks, userData, option)
        case .client: rv = nghttp2_session_client_new2(&session, nghttp2Callbacks, userData, option)
        }
        guard rv == 0, let session else {
            throw TransportError(.http2Protocol, "cannot create nghttp2 session: \(NGHTTP2Session.describe(rv))")
        }
        raw = session
        var entries = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: settings.maxConcurrentStreams),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: UInt32(settings.initialStreamWindow)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: settings.maxHeaderListSize),
        ]
        if role == .client {
            // Clients accept no pushed streams.
            entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0))
        }
        var result = nghttp2_submit_settings(raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), entries, entries.count)
        if result == 0, settings.connectionWindow > 65535 {
            result = nghttp2_session_set_local_window_size(
                raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, settings.connectionWindow)
        }
        if result != 0 {
            nghttp2_session_del(raw)
            throw TransportError(.http2Protocol, "cannot submit SETTINGS: \(NGHTTP2Session.describe(result))")
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        nghttp2_session_del(raw)
    }

    deinit {
        if !isClosed { nghttp2_session_del(raw) }
    }

    static func describe(_ code: Int32) -> String {
        String(cString: nghttp2_strerror(code))
    }

    static func describeHTTP2Error(_ code: UInt32) -> String {
        String(cString: nghttp2_http2_strerror(code))
    }
}

/// Builds an `nghttp2_nv` array over one contiguous byte buffer (stack-allocated when small)
/// and runs `body` with it. nghttp2 copies names and values in every submit call used here.
func withNameValueArray<T>(_ headers: HeaderFields, _ body: (UnsafePointer<nghttp2_nv>, Int) -> T) -> T {
    var total = 1
    for field in headers { total += field.name.utf8.count + field.value.utf8.count }
    let count = headers.count
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: total) { bytes in
        withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(1, count)) { nva in
            let base = bytes.baseAddress!
            var offset = 0
            var index = 0
            for field in headers {
                var name = field.name
                var value = field.value
                let nameStart = offset
                name.withUTF8 { utf8 in
                    if let source = utf8.baseAddress { (base + offset).initialize(from: source, count: utf8.count) }
                    offset += utf8.count
                }
                let valueStart = offset
                value.withUTF8 { utf8 in
                    if let source = utf8.baseAddress { (base + offset).initialize(from: source, count: utf8.count) }
                    offset += utf8.count
                }
                (nva.baseAddress! + index).initialize(
                    to: nghttp2_nv(
                        name: base + nameStart, value: base + valueStart, namelen: valueStart - nameStart,
                        valuelen: offset - valueStart, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                index += 1
            }
            return body(UnsafePointer(nva.baseAddress!), count)
        }
    }
}
