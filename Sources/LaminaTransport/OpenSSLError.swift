import COpenSSL

/// Reads OpenSSL's per-thread error queue into strings and empties it.
enum OpenSSLError {
    /// Empties this thread's error queue before an OpenSSL call whose failure is read from it.
    /// Looks first: OpenSSL 3.0's `ERR_clear_error` resets all 16 slots and frees 32 pointers
    /// even when the queue is empty, and it ran before every TLS record (2 % of the event loop).
    @inline(__always)
    static func clearQueue() {
        if ERR_peek_error() != 0 { ERR_clear_error() }
    }

    /// All queued errors, oldest first, as OpenSSL's reason strings; the queue is cleared.
    static func drainQueue() -> [String] {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(
                String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages
    }

    /// A `TransportError` whose reason is `context` followed by the queued OpenSSL reasons.
    static func make(
        _ code: TransportError.Code, _ context: String, file: String = #fileID, line: Int = #line
    ) -> TransportError {
        let queued = drainQueue()
        let reason = queued.isEmpty ? context : "\(context): \(queued.joined(separator: "; "))"
        return TransportError(code, reason, file: file, line: line)
    }
}
