import COpenSSL
import NIOCore

/// What a finished handshake agreed on.
public struct TLSConnectionInfo: Sendable, Hashable {
    /// e.g. "TLSv1.3".
    public var protocolVersion: String
    /// e.g. "TLS_AES_128_GCM_SHA256".
    public var cipher: String
    /// The negotiated ALPN protocol: "h2", or "http/1.1" on a server that offers it (also
    /// when the client offered no ALPN).
    public var alpn: String
    /// Whether the session was resumed (no full handshake).
    public var resumed: Bool
    /// The peer's leaf certificate, DER-encoded, when it sent one.
    public var peerCertificateDER: [UInt8]?
    /// The common name (CN) in the subject of the peer's verified leaf certificate.
    public var peerCommonName: String? = nil
}

/// One `SSL` over the custom ByteBuffer BIO. Owns the `SSL` (and through it the BIO);
/// used by ``TLSHandler`` only, on its event loop.
final class TLSConnection {
    private let ssl: OpaquePointer
    private let bio: OpaquePointer
    private let context: TLSContext
    private let allocator: ByteBufferAllocator
    private var inbound: ByteBuffer?
    private var outbound: ByteBuffer?
    /// Client role: the cache key of this connection's server (for session resumption).
    let sessionKey: String?

    enum Step {
        case done
        case wantRead
        case closed
        case failed(TransportError)
    }

    init(context: TLSContext, serverHostname: String?, allocator: ByteBufferAllocator) throws {
        OpenSSLError.clearQueue()
        guard let ssl = SSL_new(context.ctx) else { throw OpenSSLError.make(.tlsFailure, "SSL_new failed") }
        guard let bio = BIO_new(byteBufferBIOMethod) else {
            SSL_free(ssl)
            throw OpenSSLError.make(.tlsFailure, "BIO_new failed")
        }
        self.ssl = ssl
        self.bio = bio
        self.context = context
        self.allocator = allocator
        self.sessionKey = context.configuration.role == .client ? serverHostname : nil
        BIO_set_init(bio, 1)
        BIO_set_shutdown(bio, 1)
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        SSL_set_bio(ssl, bio, bio)  // the same BIO both ways: the SSL takes our one reference
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
        if context.configuration.role == .client {
            SSL_set_connect_state(ssl)
            guard let host = serverHostname, !host.isEmpty else {
                throw TransportError(.tlsConfiguration, "a client connection needs the server host name to verify")
            }
            let param = SSL_get0_param(ssl)
            if Self.isIPAddress(host) {
                guard X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1 else {
                    throw OpenSSLError.make(.tlsConfiguration, "cannot verify IP address \(host)")
                }
            } else {
                guard lamina_SSL_set_tlsext_host_name(ssl, host) == 1, SSL_set1_host(ssl, host) == 1 else {
                    throw OpenSSLError.make(.tlsConfiguration, "cannot set server name \(host)")
                }
            }
            context.resumeSession(on: ssl, for: host)
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit {
        BIO_set_data(bio, nil)
        SSL_free(ssl)
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }

    // MARK: BIO side

    func feed(_ buffer: inout ByteBuffer) {
        if inbound == nil { inbound = buffer } else { inbound!.writeBuffer(&buffer) }
    }

    var hasInbound: Bool { (inbound?.readableBytes ?? 0) > 0 }

    var inboundReadable: Int { inbound?.readableBytes ?? 0 }

    func takeInbound(into target: UnsafeMutableRawBufferPointer) -> Int {
        guard var buffer = inbound else { return 0 }
        let count = min(target.count, buffer.readableBytes)
        buffer.withUnsafeReadableBytes { source in
            target.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: count)
        }
        buffer.moveReaderIndex(forwardBy: count)
        inbound = buffer.readableBytes == 0 ? nil : buffer
        return count
    }

    func appendOutbound(_ bytes: UnsafeRawBufferPointer) {
        if outbound == nil { outbound = allocator.buffer(capacity: max(bytes.count, 1024)) }
        outbound!.writeBytes(bytes)
    }

    /// Ciphertext produced since the last call, or nil. The connection keeps no buffer afterwards.
    func takeOutbound() -> ByteBuffer? {
        defer { outbound = nil }
        return outbound
    }

    // MARK: SSL side

    func handshake() -> Step {
        OpenSSLError.clearQueue()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        return classify(result, during: "TLS handshake")
    }

    /// Decrypts into `buffer` until OpenSSL wants more ciphertext.
    func read(into buffer: inout ByteBuffer) -> Step {
        OpenSSLError.clearQueue()
        while true {
            if buffer.writableBytes < 1024 { buffer.reserveCapacity(minimumWritableBytes: 16 * 1024) }
            var result: Int32 = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { raw in
                result = SSL_read(ssl, raw.baseAddress, Int32(clamping: raw.count))
                return result > 0 ? Int(result) : 0
            }
            if result > 0 { continue }
            return classify(result, during: "TLS read")
        }
    }

    func write(_ buffer: ByteBuffer) -> TransportError? {
        guard buffer.readableBytes > 0 else { return nil }
        OpenSSLError.clearQueue()
        return buffer.withUnsafeReadableBytes { raw in
            let result = SSL_write(ssl, raw.baseAddress, Int32(clamping: raw.count))
            if result == raw.count {
                TransportOutputCounters.countTLSWrite(plaintextBytes: raw.count)
                return nil
            }
            if case .failed(let error) = classify(result, during: "TLS write") { return error }
            return TransportError(.tlsFailure, "TLS write accepted \(result) of \(raw.count) bytes")
        }
    }

    /// Queues close_notify. Returns true when the peer's close_notify has also been seen.
    @discardableResult
    func shutdown() -> Bool {
        OpenSSLError.clearQueue()
        let result = SSL_shutdown(ssl)
        _ = OpenSSLError.drainQueue()
        return result == 1
    }

    private func classify(_ result: Int32, during: String) -> Step {
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_ZERO_RETURN: return .closed
        default:
            var context = "\(during) failed"
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK, let text = X509_verify_cert_error_string(verify) {
                context += " (certificate verification: \(String(cString: text)))"
            }
            let codeName = code == SSL_ERROR_SYSCALL ? "SSL_ERROR_SYSCALL" : "SSL_ERROR \(code)"
            var error = OpenSSLError.make(isHandshake ? .tlsHandshake : .tlsFailure, context)
            if error.reason == context { error.reason += " (\(codeName))" }
            return .failed(error)
        }
    }

    private var isHandshake: Bool { SSL_is_init_finished(ssl) != 1 }

    /// Checks what a client requires beyond OpenSSL's own verification: ALPN `h2` on both
    /// roles (`http/1.1` where the configuration offers it), and the pinned certificate when pinning.
    func verifyAfterHandshake() -> TransportError? {
        let alpn = selectedALPN
        let http1 = context.configuration.offersHTTP1
        let agreed =
            context.configuration.role == .client && http1
            ? alpn == "http/1.1" : alpn == "h2" || (alpn == "http/1.1" && http1)
        guard agreed else {
            return TransportError(
                .alpnRefused,
                "the peer did not negotiate ALPN \(context.configuration.role == .client && http1 ? "http/1.1" : "h2")")
        }
        if let pinned = context.pinned {
            guard let peer = SSL_get1_peer_certificate(ssl) else {
                return TransportError(.tlsHandshake, "the server sent no certificate")
            }
            defer { X509_free(peer) }
            if X509_cmp(peer, pinned) != 0 {
                return TransportError(.tlsHandshake, "the server certificate is not the pinned certificate")
            }
        }
        return nil
    }

    /// The ALPN protocol selected; "http/1.1" when none was and the server offers HTTP/1.1.
    private var selectedALPN: String {
        var alpnData: UnsafePointer<UInt8>? = nil
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpnData, &alpnLength)
        guard let alpnData, alpnLength > 0 else {
            return context.configuration.offersHTTP1 ? "http/1.1" : ""
        }
        return String(decoding: UnsafeBufferPointer(start: alpnData, count: Int(alpnLength)), as: UTF8.self)
    }

    var info: TLSConnectionInfo {
        var peerDER: [UInt8]? = nil
        var commonName: String? = nil
        if let peer = SSL_get1_peer_certificate(ssl) {
            if let subject = X509_get_subject_name(peer) {
                var name = [CChar](repeating: 0, count: 256)
                let length = X509_NAME_get_text_by_NID(subject, NID_commonName, &name, Int32(name.count))
                if length > 0, length < Int32(name.count) {
                    commonName = String(decoding: name.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                }
            }
            var out: UnsafeMutablePointer<UInt8>? = nil
            let length = i2d_X509(peer, &out)
            if length > 0, let out {
                peerDER = Array(UnsafeBufferPointer(start: out, count: Int(length)))
                lamina_OPENSSL_free(out)
            }
            X509_free(peer)
        }
        return TLSConnectionInfo(
            protocolVersion: String(cString: SSL_get_version(ssl)),
            cipher: SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? "",
            alpn: selectedALPN,
            resumed: SSL_session_reused(ssl) == 1,
            peerCertificateDER: peerDER,
            peerCommonName: commonName)
    }
}
