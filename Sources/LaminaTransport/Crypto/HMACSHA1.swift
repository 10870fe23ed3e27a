import COpenSSL

/// HMAC-SHA1 (webhook signatures, as Layer signed them: `layer-webhook-signature`).
public enum HMACSHA1 {
    /// The 20-byte HMAC-SHA1 of `message` under `key`.
    public static func mac(key: [UInt8], message: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        var length = 0
        OpenSSLError.clearQueue()
        let result = key.withUnsafeBytes { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_Q_mac(
                        nil, "HMAC", nil, "SHA1", nil, k.baseAddress, k.count, m.baseAddress, m.count,
                        o.baseAddress, o.count, &length)
                }
            }
        }
        guard result != nil, length == 20 else { throw OpenSSLError.make(.crypto, "HMAC-SHA1 failed") }
        return out
    }

    /// The HMAC-SHA1 as 40 lower-case hex digits.
    public static func hex(key: [UInt8], message: [UInt8]) throws -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(40)
        for byte in try mac(key: key, message: message) {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
