import COpenSSL

/// Reads OpenSSL's per-thread error queue into strings and empties it.
enum OpenSSLError {
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
