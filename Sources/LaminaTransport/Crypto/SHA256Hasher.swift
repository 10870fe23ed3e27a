import COpenSSL
import NIOCore

/// The SHA-256 implementation, fetched once (OpenSSL 3 is slow to fetch per use).
nonisolated(unsafe) let sha256Algorithm: OpaquePointer = {
    guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { fatalError("OpenSSL has no SHA256") }
    return md
}()

/// Streaming SHA-256 (content hashes of rich content, token fingerprints).
public final class SHA256Hasher {
    private let context: OpaquePointer
    private var finished = false

    public init() throws {
        OpenSSLError.clearQueue()
        guard let context = EVP_MD_CTX_new() else { throw OpenSSLError.make(.crypto, "EVP_MD_CTX_new failed") }
        guard EVP_DigestInit_ex(context, sha256Algorithm, nil) == 1 else {
            EVP_MD_CTX_free(context)
            throw OpenSSLError.make(.crypto, "cannot start SHA-256")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds bytes to the hash.
    public func update(_ bytes: UnsafeRawBufferPointer) throws {
        guard !finished else { throw TransportError(.invalidState, "SHA-256 already finalized") }
        guard bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
            throw OpenSSLError.make(.crypto, "SHA-256 update failed")
        }
    }

    public func update(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try update($0) }
    }

    public func update(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { try update($0) }
    }

    /// The 32-byte digest. The hasher cannot be updated afterwards.
    public func finalize() throws -> [UInt8] {
        guard !finished else { throw TransportError(.invalidState, "SHA-256 already finalized") }
        finished = true
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1, length == 32 else {
            throw OpenSSLError.make(.crypto, "SHA-256 final failed")
        }
        return digest
    }

    /// SHA-256 of `bytes` in one call.
    public static func hash(_ bytes: [UInt8]) throws -> [UInt8] {
        bytes.withUnsafeBytes { oneShot($0) }
    }

    /// SHA-256 of a buffer's readable bytes in one call (no copy into an array first).
    public static func hash(_ buffer: ByteBuffer) throws -> [UInt8] {
        buffer.withUnsafeReadableBytes { oneShot($0) }
    }

    /// One buffer hashed without an EVP context (no allocation but the digest's array): a
    /// SEND's digest is taken on the event loop for every command.
    private static func oneShot(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            lamina_SHA256_oneshot(bytes.baseAddress, bytes.count, digest.baseAddress)
            count = 32
        }
    }
}
