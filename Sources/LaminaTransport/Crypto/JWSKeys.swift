import COpenSSL

/// JWS algorithms the node accepts (RFC 7518 §3.3 RS256, §3.4 ES256).
public enum JWSAlgorithm: String, Sendable, Hashable {
    case rs256 = "RS256"
    case es256 = "ES256"
}

/// A public key (PEM SubjectPublicKeyInfo) that verifies JWS signatures.
public final class JWSPublicKey: @unchecked Sendable {
    private let key: OpaquePointer
    /// The algorithm this key's type allows.
    public let algorithm: JWSAlgorithm

    /// Loads an RSA (≥ 2048 bits, RS256) or P-256 (ES256) public key.
    public init(pem: String) throws {
        key = try ECKeys.publicKey(pem: pem)
        do {
            algorithm = try JWSKeyType.algorithm(of: key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` (for ES256: raw r‖s, 64 bytes, as on the wire) signs `signingInput`
    /// (the ASCII `base64url(header).base64url(payload)`) under `algorithm`. A wrong algorithm
    /// for the key, a malformed signature or a mismatch all give false.
    public func verify(signature: [UInt8], signingInput: [UInt8], algorithm: JWSAlgorithm) -> Bool {
        guard algorithm == self.algorithm else { return false }
        let der: [UInt8]
        switch algorithm {
        case .rs256:
            der = signature
        case .es256:
            guard signature.count == 64, let converted = ECDSASignature.der(fromRaw: signature) else { return false }
            der = converted
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        OpenSSLError.clearQueue()
        defer { OpenSSLError.clearQueue() }
        guard EVP_DigestVerifyInit(context, nil, sha256Algorithm, nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, der, der.count, signingInput, signingInput.count) == 1
    }
}

/// A P-256 private key that makes ES256 signatures (the development identity provider).
public final class ES256Signer: @unchecked Sendable {
    private let key: OpaquePointer

    /// Loads a PEM P-256 private key.
    public init(privateKeyPEM: String) throws {
        key = try JWSKeyType.privateKey(pem: privateKeyPEM, for: .es256, refusal: "ES256 needs a P-256 private key")
    }

    deinit { EVP_PKEY_free(key) }

    /// The JWS signature of `signingInput`: raw r‖s, 64 bytes.
    public func sign(_ signingInput: [UInt8]) throws -> [UInt8] {
        let der = try JWSKeyType.sha256Sign(signingInput, with: key, name: "ES256")
        guard let raw = ECDSASignature.raw(fromDER: der) else {
            throw TransportError(.crypto, "cannot convert the ECDSA signature to r||s")
        }
        return raw
    }
}

enum JWSKeyType {
    /// A PEM private key that signs with `algorithm`; anything else is refused with `refusal`.
    static func privateKey(pem: String, for algorithm: JWSAlgorithm, refusal: String) throws -> OpaquePointer {
        let loaded = try ECKeys.privateKey(pem: pem)
        guard (try? Self.algorithm(of: loaded)) == algorithm else {
            EVP_PKEY_free(loaded)
            throw TransportError(.crypto, refusal)
        }
        return loaded
    }

    /// OpenSSL's SHA-256 signature of `input` with `key` (DER for ECDSA, raw for RSA).
    static func sha256Sign(_ input: [UInt8], with key: OpaquePointer, name: String) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw OpenSSLError.make(.crypto, "EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(context) }
        OpenSSLError.clearQueue()
        guard EVP_DigestSignInit(context, nil, sha256Algorithm, nil, key) == 1 else {
            throw OpenSSLError.make(.crypto, "cannot start \(name) signing")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, input, input.count) == 1 else {
            throw OpenSSLError.make(.crypto, "cannot size \(name) signature")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, input, input.count) == 1 else {
            throw OpenSSLError.make(.crypto, "\(name) signing failed")
        }
        return Array(signature.prefix(length))
    }

    static func algorithm(of key: OpaquePointer) throws -> JWSAlgorithm {
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA:
            guard EVP_PKEY_get_bits(key) >= 2048 else {
                throw TransportError(.crypto, "RSA keys under 2048 bits are refused")
            }
            return .rs256
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1,
                ["prime256v1", "P-256"].contains(
                    String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
            else { throw TransportError(.crypto, "only P-256 EC keys are accepted (ES256)") }
            return .es256
        default:
            throw TransportError(.crypto, "unsupported key type for JWS (RSA or P-256 only)")
        }
    }
}

/// ECDSA P-256 signatures between JWS's raw r‖s (RFC 7518 §3.4) and OpenSSL's DER.
enum ECDSASignature {
    static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {  // takes ownership of r and s
            BN_free(r)
            BN_free(s)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { return nil }
        defer { lamina_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        var signature: OpaquePointer? = nil
        der.withUnsafeBufferPointer { buffer in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            signature = d2i_ECDSA_SIG(nil, &pointer, buffer.count)
        }
        guard let signature else { return nil }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer? = nil
        var s: OpaquePointer? = nil
        ECDSA_SIG_get0(signature, &r, &s)
        guard let r, let s else { return nil }
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(r, buffer.baseAddress, 32) == 32 && BN_bn2binpad(s, buffer.baseAddress! + 32, 32) == 32
        }
        return ok ? raw : nil
    }
}

/// An RSA private key (2048 bits or more) that makes RS256 signatures (RSASSA-PKCS1-v1_5 with
/// SHA-256): FCM's service-account assertions.
public final class RS256Signer: @unchecked Sendable {
    private let key: OpaquePointer

    /// Loads a PEM RSA private key (PKCS#1 or PKCS#8).
    public init(privateKeyPEM: String) throws {
        key = try JWSKeyType.privateKey(
            pem: privateKeyPEM, for: .rs256, refusal: "RS256 needs an RSA private key of at least 2048 bits")
    }

    deinit { EVP_PKEY_free(key) }

    /// The JWS signature of `signingInput` (as long as the modulus).
    public func sign(_ signingInput: [UInt8]) throws -> [UInt8] {
        try JWSKeyType.sha256Sign(signingInput, with: key, name: "RS256")
    }
}
