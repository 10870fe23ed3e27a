import COpenSSL

/// Cryptographically secure random bytes (OpenSSL's CSPRNG).
public enum SecureRandom {
    /// `count` random bytes (at most 1 MiB per call).
    public static func bytes(_ count: Int) throws -> [UInt8] {
        guard count >= 0, count <= 1 << 20 else {
            throw TransportError(.crypto, "random byte count \(count) outside 0...1048576")
        }
        var out = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return out }
        OpenSSLError.clearQueue()
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard ok == 1 else { throw OpenSSLError.make(.crypto, "RAND_bytes failed") }
        return out
    }
}
