import COpenSSL

/// PEM file and string loading. Every returned pointer is owned by the caller's wrapper.
enum PEM {
    static func readCertificate(path: String) throws -> OpaquePointer {
        OpenSSLError.clearQueue()
        guard let bio = BIO_new_file(path, "r") else {
            throw OpenSSLError.make(.io, "cannot open certificate \(path)")
        }
        defer { BIO_free(bio) }
        guard let cert = PEM_read_bio_X509(bio, nil, nil, nil) else {
            throw OpenSSLError.make(.tlsConfiguration, "cannot parse certificate \(path)")
        }
        return cert
    }

    /// Runs `body` with a read-only memory BIO over `pem`.
    static func withMemoryBIO<T>(_ pem: String, _ body: (OpaquePointer) throws -> T) throws -> T {
        var bytes = Array(pem.utf8)
        return try bytes.withUnsafeMutableBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                throw OpenSSLError.make(.crypto, "cannot create memory BIO")
            }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    /// Runs `write` against a writable memory BIO and returns what it wrote as a string.
    static func writeToString(_ write: (OpaquePointer) -> Int32, what: String) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw OpenSSLError.make(.crypto, "cannot create memory BIO") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw OpenSSLError.make(.crypto, "cannot write \(what)") }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = lamina_BIO_get_mem_data(bio, &data)
        guard let data, length > 0 else { throw OpenSSLError.make(.crypto, "empty \(what)") }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}
