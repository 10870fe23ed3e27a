import CNghttp2
import COpenSSL
import NIOConcurrencyHelpers
import NIOCore

/// One OpenSSL `SSL_CTX` built from a ``TLSConfiguration``. Thread-safe; share one per
/// configuration between all connections (OpenSSL 3 is slow when contexts multiply).
public final class TLSContext: @unchecked Sendable {
    /// The configuration this context was built from.
    public let configuration: TLSConfiguration
    let ctx: OpaquePointer
    /// Pinned peer certificate (client role with `.pinnedCertificate`).
    let pinned: OpaquePointer?
    /// Client role: the newest session per server name, for resumption.
    private let sessions = NIOLockedValueBox<[String: OpaquePointer]>([:])
    static let maxCachedSessions = 256

    /// Builds the `SSL_CTX`. Throws ``TransportError`` with OpenSSL's reason when a file
    /// cannot be loaded or the key does not match the certificate.
    public init(_ configuration: TLSConfiguration) throws {
        self.configuration = configuration
        OpenSSLError.clearQueue()
        let method = configuration.role == .server ? TLS_server_method() : TLS_client_method()
        guard let ctx = SSL_CTX_new(method) else {
            throw OpenSSLError.make(.tlsConfiguration, "SSL_CTX_new failed")
        }
        self.ctx = ctx
        var pinned: OpaquePointer? = nil
        do {
            try Self.applyCommon(ctx, configuration)
            switch configuration.role {
            case .server: try Self.applyServer(ctx, configuration)
            case .client: pinned = try Self.applyClient(ctx, configuration)
            }
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        self.pinned = pinned
        if configuration.role == .client {
            // App data slot 0 lets the new-session callback find this context.
            SSL_CTX_set_ex_data(ctx, 0, Unmanaged.passUnretained(self).toOpaque())
            SSL_CTX_sess_set_new_cb(ctx, tlsNewSessionCallback)
        }
    }

    deinit {
        for (_, session) in sessions.withLockedValue({ $0 }) { SSL_SESSION_free(session) }
        if let pinned { X509_free(pinned) }
        SSL_CTX_free(ctx)
    }

    private static func check(_ ok: Bool, _ what: String) throws {
        if !ok { throw OpenSSLError.make(.tlsConfiguration, what) }
    }

    private static func applyCommon(_ ctx: OpaquePointer, _ c: TLSConfiguration) throws {
        try check(lamina_SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1, "cannot set minimum TLS version")
        try check(lamina_SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1, "cannot set maximum TLS version")
        try check(SSL_CTX_set_cipher_list(ctx, MozillaIntermediate.tls12Ciphers) == 1, "cannot set TLS 1.2 ciphers")
        try check(SSL_CTX_set_ciphersuites(ctx, MozillaIntermediate.tls13Suites) == 1, "cannot set TLS 1.3 suites")
        try check(lamina_SSL_CTX_set1_groups_list(ctx, MozillaIntermediate.groups) == 1, "cannot set groups")
        _ = SSL_CTX_set_options(ctx, lamina_SSL_OP_NO_RENEGOTIATION() | lamina_SSL_OP_NO_COMPRESSION())
        // An idle connection holds no record buffers (~34 KB): OpenSSL allocates them per record
        // instead, ~1 % of the event loop at 2,000 msg/s (WRITE-PATH.md, session 33).
        _ = lamina_SSL_CTX_set_mode(ctx, lamina_SSL_MODE_RELEASE_BUFFERS())
        if let chain = c.certificateChainFile {
            try check(SSL_CTX_use_certificate_chain_file(ctx, chain) == 1, "cannot load certificate chain \(chain)")
            guard let key = c.privateKeyFile else {
                throw TransportError(.tlsConfiguration, "a certificate needs a private key file")
            }
            try check(SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1, "cannot load private key \(key)")
            try check(SSL_CTX_check_private_key(ctx) == 1, "private key does not match the certificate")
        }
    }

    private static func applyServer(_ ctx: OpaquePointer, _ c: TLSConfiguration) throws {
        guard c.certificateChainFile != nil else {
            throw TransportError(.tlsConfiguration, "a server needs a certificate chain and a private key")
        }
        _ = SSL_CTX_set_options(ctx, lamina_SSL_OP_CIPHER_SERVER_PREFERENCE())
        // Stateless tickets carry resumption; no server-side session cache to grow.
        _ = lamina_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_OFF))
        if c.sessionTicketsPerHandshake <= 0 {
            _ = SSL_CTX_set_options(ctx, lamina_SSL_OP_NO_TICKET())
        }
        _ = SSL_CTX_set_num_tickets(ctx, max(0, c.sessionTicketsPerHandshake))
        SSL_CTX_set_alpn_select_cb(ctx, c.offersHTTP1 ? tlsALPNSelectH2OrHTTP1Callback : tlsALPNSelectCallback, nil)
        if let ca = c.clientCAFile {
            try check(SSL_CTX_load_verify_locations(ctx, ca, nil) == 1, "cannot load client CA file \(ca)")
            guard let names = SSL_load_client_CA_file(ca) else {
                throw OpenSSLError.make(.tlsConfiguration, "cannot read client CA names from \(ca)")
            }
            SSL_CTX_set_client_CA_list(ctx, names)
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
    }

    private static func applyClient(_ ctx: OpaquePointer, _ c: TLSConfiguration) throws -> OpaquePointer? {
        guard let trust = c.trust else {
            throw TransportError(.tlsConfiguration, "a client needs a trust setting (CA file or pinned certificate)")
        }
        _ = lamina_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE))
        if c.offersHTTP1 {
            let http1: [UInt8] = [8] + Array("http/1.1".utf8)
            try check(SSL_CTX_set_alpn_protos(ctx, http1, UInt32(http1.count)) == 0, "cannot set ALPN")
        } else {
            try check(
                SSL_CTX_set_alpn_protos(ctx, lamina_nghttp2_h2_alpn(), lamina_nghttp2_h2_alpn_length()) == 0,
                "cannot set ALPN")
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        switch trust {
        case .caFile(let path):
            try check(SSL_CTX_load_verify_locations(ctx, path, nil) == 1, "cannot load CA file \(path)")
            return nil
        case .pinnedCertificate(let path):
            let cert = try PEM.readCertificate(path: path)
            // The pinned certificate is the only trust anchor; the handshake then checks equality.
            guard X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), cert) == 1 else {
                X509_free(cert)
                throw OpenSSLError.make(.tlsConfiguration, "cannot trust pinned certificate \(path)")
            }
            return cert
        case .systemDefault:
            try check(SSL_CTX_set_default_verify_paths(ctx) == 1, "cannot load the system's trust store")
            return nil
        }
    }

    // MARK: client session cache

    func storeSession(_ session: OpaquePointer, for key: String) {
        let old: OpaquePointer? = sessions.withLockedValue { cache in
            if cache.count >= Self.maxCachedSessions, cache[key] == nil, let victim = cache.keys.first {
                let evicted = cache.removeValue(forKey: victim)
                if let evicted { SSL_SESSION_free(evicted) }
            }
            let previous = cache[key]
            cache[key] = session
            return previous
        }
        if let old { SSL_SESSION_free(old) }
    }

    /// Applies the cached session for `key` to `ssl` (SSL_set_session takes its own reference).
    func resumeSession(on ssl: OpaquePointer, for key: String) {
        sessions.withLockedValue { cache in
            if let session = cache[key] { _ = SSL_set_session(ssl, session) }
        }
    }
}

/// Server ALPN: select `h2` or refuse the handshake with a fatal no_application_protocol alert.
private let tlsALPNSelectCallback:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, offered, offeredLength, _ in
        selectALPN(out, outLength, offered, offeredLength, acceptingHTTP1: false)
    }

/// Server ALPN with HTTP/1.1 offered: `h2` if the client offers it, else `http/1.1`, else
/// refuse the handshake.
private let tlsALPNSelectH2OrHTTP1Callback:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, offered, offeredLength, _ in
        selectALPN(out, outLength, offered, offeredLength, acceptingHTTP1: true)
    }

/// Picks `h2` from the client's ALPN list (wire format: length-prefixed names), else
/// `http/1.1` when `acceptingHTTP1`, else refuses the handshake.
private func selectALPN(
    _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32, acceptingHTTP1: Bool
) -> Int32 {
    guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let http1 = Array("http/1.1".utf8)
    var found: (Int, Int)? = nil
    var index = 0
    let total = Int(offeredLength)
    while index < total {
        let length = Int(offered[index])
        let start = index + 1
        if start + length > total { break }
        if length == 2 && offered[start] == UInt8(ascii: "h") && offered[start + 1] == UInt8(ascii: "2") {
            out.pointee = offered + start
            outLength.pointee = 2
            return SSL_TLSEXT_ERR_OK
        }
        if acceptingHTTP1, found == nil, length == http1.count,
            (0..<length).allSatisfy({ offered[start + $0] == http1[$0] })
        {
            found = (start, length)
        }
        index = start + length
    }
    guard let (start, length) = found else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    out.pointee = offered + start
    outLength.pointee = UInt8(length)
    return SSL_TLSEXT_ERR_OK
}

/// Client: keep the newest session ticket per server for resumption. Returning 1 keeps the reference.
private let tlsNewSessionCallback: @convention(c) (OpaquePointer?, OpaquePointer?) -> Int32 = { ssl, session in
    guard let ssl, let session, let ctx = SSL_get_SSL_CTX(ssl), let raw = SSL_CTX_get_ex_data(ctx, 0),
        let keyRaw = SSL_get_ex_data(ssl, 0)
    else { return 0 }
    let context = Unmanaged<TLSContext>.fromOpaque(raw).takeUnretainedValue()
    let connection = Unmanaged<TLSConnection>.fromOpaque(keyRaw).takeUnretainedValue()
    guard let key = connection.sessionKey else { return 0 }
    context.storeSession(session, for: key)
    return 1
}
