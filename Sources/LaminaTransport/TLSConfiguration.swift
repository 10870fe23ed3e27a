import NIOCore

/// How a TLS endpoint is set up. Build a ``TLSContext`` from it once and share that
/// context between all connections of the same configuration.
///
/// Both roles speak TLS 1.2 and 1.3 only, with the Mozilla "intermediate" cipher
/// suites and groups (X25519, P-256, P-384), no renegotiation, no compression and
/// ALPN `h2` only.
public struct TLSConfiguration: Sendable {
    /// What a client trusts when it verifies a server.
    public enum Trust: Sendable, Hashable {
        /// Certificates that chain to a CA in this PEM file.
        case caFile(String)
        /// Exactly this certificate (PEM file), which must also match the host name.
        case pinnedCertificate(String)
        /// The system's trust store (OpenSSL's default verify paths).
        case systemDefault
    }

    public enum Role: Sendable, Hashable { case server, client }

    /// Server or client.
    public var role: Role
    /// PEM certificate chain presented to the peer (required for a server; for a client, its
    /// mutual-TLS certificate).
    public var certificateChainFile: String?
    /// PEM private key matching ``certificateChainFile``.
    public var privateKeyFile: String?
    /// Client role: how the server's certificate is verified.
    public var trust: Trust?
    /// Server role: when set, clients must present a certificate chaining to a CA in this PEM
    /// file (mutual TLS); connections without one are refused.
    public var clientCAFile: String?
    /// Handshakes that take longer are aborted with ``TransportError/Code/handshakeTimeout``.
    public var handshakeTimeout: TimeAmount = .seconds(10)
    /// TLS 1.3 session tickets a server issues per full handshake (resumption). 0 disables tickets.
    public var sessionTicketsPerHandshake: Int = 1
    /// Server role: also accept ALPN `http/1.1`, and clients that offer no ALPN at all
    /// (they speak HTTP/1.1). `h2` is preferred whenever the client offers it.
    /// Client role: offer `http/1.1` instead of `h2` (an ``HTTP1Client``); a server that
    /// selects no ALPN is taken to speak HTTP/1.1.
    public var offersHTTP1 = false

    /// A server presenting `certificateChainFile`; pass `clientCAFile` to require client certificates.
    public static func server(
        certificateChainFile: String, privateKeyFile: String, clientCAFile: String? = nil
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            trust: nil, clientCAFile: clientCAFile)
    }

    /// A client verifying servers with `trust`; pass a certificate and key for mutual TLS.
    public static func client(
        trust: Trust, certificateChainFile: String? = nil, privateKeyFile: String? = nil
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .client, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            trust: trust, clientCAFile: nil)
    }

    init(role: Role, certificateChainFile: String?, privateKeyFile: String?, trust: Trust?, clientCAFile: String?) {
        self.role = role
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.trust = trust
        self.clientCAFile = clientCAFile
    }
}

/// The Mozilla "intermediate" profile (https://ssl-config.mozilla.org, v5.7).
enum MozillaIntermediate {
    static let tls12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
    static let tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
    static let groups = "X25519:prime256v1:secp384r1"
}
