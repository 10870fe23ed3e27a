import COpenSSL

/// ECDSA P-256 key pairs as PEM text (PKCS#8 private key, SubjectPublicKeyInfo public key).
public struct ECKeyPair: Sendable, Hashable {
    public var privateKeyPEM: String
    public var publicKeyPEM: String

    /// A fresh P-256 key pair.
    public static func generateP256() throws -> ECKeyPair {
        OpenSSLError.clearQueue()
        guard let key = lamina_EVP_EC_gen("P-256") else {
            throw OpenSSLError.make(.crypto, "cannot generate a P-256 key")
        }
        defer { EVP_PKEY_free(key) }
        return ECKeyPair(privateKeyPEM: try ECKeys.privateKeyPEM(key), publicKeyPEM: try ECKeys.publicKeyPEM(key))
    }
}

/// Key loading shared by the crypto helpers. Returned pointers are freed by the caller.
enum ECKeys {
    static func privateKeyPEM(_ key: OpaquePointer) throws -> String {
        try PEM.writeToString({ PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }, what: "private key")
    }

    static func publicKeyPEM(_ key: OpaquePointer) throws -> String {
        try PEM.writeToString({ PEM_write_bio_PUBKEY($0, key) }, what: "public key")
    }

    static func readPrivateKey(path: String) throws -> OpaquePointer {
        OpenSSLError.clearQueue()
        guard let bio = BIO_new_file(path, "r") else { throw OpenSSLError.make(.io, "cannot open private key \(path)") }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
            throw OpenSSLError.make(.crypto, "cannot parse private key \(path)")
        }
        return key
    }

    static func privateKey(pem: String) throws -> OpaquePointer {
        OpenSSLError.clearQueue()
        return try PEM.withMemoryBIO(pem) { bio in
            guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
                throw OpenSSLError.make(.crypto, "cannot parse PEM private key")
            }
            return key
        }
    }

    static func publicKey(pem: String) throws -> OpaquePointer {
        OpenSSLError.clearQueue()
        return try PEM.withMemoryBIO(pem) { bio in
            guard let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else {
                throw OpenSSLError.make(.crypto, "cannot parse PEM public key")
            }
            return key
        }
    }
}
