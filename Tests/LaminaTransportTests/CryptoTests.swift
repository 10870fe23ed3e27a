import COpenSSL
import Foundation
import NIOCore
import Testing

@testable import LaminaTransport

@Suite struct CryptoTests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func sha256KnownVectorsAndStreaming() throws {
        // FIPS 180-2 examples.
        #expect(
            Self.hex(try SHA256Hasher.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Self.hex(try SHA256Hasher.hash([]))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let message = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(
            Self.hex(try SHA256Hasher.hash(message))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // Fed in uneven pieces (one as a ByteBuffer), the digest is the same.
        let hasher = try SHA256Hasher()
        try hasher.update(Array(message[0..<1]))
        try hasher.update(ByteBuffer(bytes: message[1..<30]))
        try hasher.update(Array(message[30...]))
        #expect(try hasher.finalize() == (try SHA256Hasher.hash(message)))
        #expect(throws: TransportError.self) { try hasher.update([1]) }
        // The one-call hash (no EVP context) and the streaming one agree across block edges.
        for size in [0, 1, 55, 56, 63, 64, 65, 1_000, 100_003] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            let streamed = try SHA256Hasher()
            try streamed.update(bytes)
            let digest = try streamed.finalize()
            #expect(try SHA256Hasher.hash(bytes) == digest)
            #expect(try SHA256Hasher.hash(ByteBuffer(bytes: bytes)) == digest)
        }
    }

    /// The check before every TLS record and hash: a queued error is cleared (so it is not
    /// blamed on the next call), an empty queue stays empty.
    @Test func openSSLErrorQueueIsClearedBeforeACall() throws {
        OpenSSLError.clearQueue()
        #expect(ERR_peek_error() == 0)
        #expect(EVP_MD_fetch(nil, "NO-SUCH-DIGEST", nil) == nil)  // queues "unsupported"
        #expect(ERR_peek_error() != 0)
        OpenSSLError.clearQueue()
        #expect(ERR_peek_error() == 0)
        // An OpenSSL operation starts by clearing what an earlier call left.
        #expect(EVP_MD_fetch(nil, "NO-SUCH-DIGEST", nil) == nil)
        let hasher = try SHA256Hasher()
        #expect(ERR_peek_error() == 0)
        try hasher.update([1, 2, 3])
        #expect(try hasher.finalize() == (try SHA256Hasher.hash([1, 2, 3])))
    }

    @Test func secureRandomBytes() throws {
        let a = try SecureRandom.bytes(32)
        let b = try SecureRandom.bytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
        #expect(try SecureRandom.bytes(0).isEmpty)
        #expect(throws: TransportError.self) { _ = try SecureRandom.bytes(2 << 20) }
    }

    @Test func es256SignAndVerify() throws {
        let pair = try ECKeyPair.generateP256()
        #expect(pair.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(pair.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let signer = try ES256Signer(privateKeyPEM: pair.privateKeyPEM)
        let key = try JWSPublicKey(pem: pair.publicKeyPEM)
        #expect(key.algorithm == .es256)
        let input = Array("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9".utf8)
        let signature = try signer.sign(input)
        #expect(signature.count == 64)
        #expect(key.verify(signature: signature, signingInput: input, algorithm: .es256))

        // Wrong signature, wrong input, wrong key, wrong algorithm, wrong length: all refused.
        var flipped = signature
        flipped[10] ^= 0x01
        #expect(!key.verify(signature: flipped, signingInput: input, algorithm: .es256))
        #expect(!key.verify(signature: signature, signingInput: input + [0x2e], algorithm: .es256))
        let otherKey = try JWSPublicKey(pem: try ECKeyPair.generateP256().publicKeyPEM)
        #expect(!otherKey.verify(signature: signature, signingInput: input, algorithm: .es256))
        #expect(!key.verify(signature: signature, signingInput: input, algorithm: .rs256))
        #expect(!key.verify(signature: Array(signature.prefix(63)), signingInput: input, algorithm: .es256))
        #expect(!key.verify(signature: [UInt8](repeating: 0, count: 64), signingInput: input, algorithm: .es256))
    }

    /// ES256 signature made by the openssl command (DER), converted to r‖s here, verified by us.
    @Test func es256VerifiesOpenSSLCommandSignature() async throws {
        let base = Fixtures.file("es256-\(UUID().uuidString)")
        let input = "header.payload-\(UUID().uuidString)"
        try Data(input.utf8).write(to: URL(fileURLWithPath: base + ".in"))
        let pair = try ECKeyPair.generateP256()
        try Data(pair.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: base + ".key"))
        let run = try await External.run(
            "openssl", ["dgst", "-sha256", "-sign", base + ".key", "-out", base + ".sig", base + ".in"])
        #expect(run.status == 0, "\(run.output)")
        let der = Array(try Data(contentsOf: URL(fileURLWithPath: base + ".sig")))
        let raw = try #require(Self.rawSignature(fromDER: der))
        let key = try JWSPublicKey(pem: pair.publicKeyPEM)
        #expect(key.verify(signature: raw, signingInput: Array(input.utf8), algorithm: .es256))
        var wrong = raw
        wrong[63] ^= 0x80
        #expect(!key.verify(signature: wrong, signingInput: Array(input.utf8), algorithm: .es256))
    }

    /// RS256: key and signature made by the openssl command.
    @Test func rs256VerifiesOpenSSLCommandSignature() async throws {
        let base = Fixtures.file("rs256-\(UUID().uuidString)")
        let input = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJib2IifQ"
        try Data(input.utf8).write(to: URL(fileURLWithPath: base + ".in"))
        let gen = try await External.run(
            "openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", base + ".key"])
        #expect(gen.status == 0, "\(gen.output)")
        let pub = try await External.run("openssl", ["pkey", "-in", base + ".key", "-pubout", "-out", base + ".pub"])
        #expect(pub.status == 0, "\(pub.output)")
        let sign = try await External.run(
            "openssl", ["dgst", "-sha256", "-sign", base + ".key", "-out", base + ".sig", base + ".in"])
        #expect(sign.status == 0, "\(sign.output)")
        let key = try JWSPublicKey(pem: try String(contentsOfFile: base + ".pub", encoding: .utf8))
        #expect(key.algorithm == .rs256)
        let signature = Array(try Data(contentsOf: URL(fileURLWithPath: base + ".sig")))
        #expect(signature.count == 256)
        #expect(key.verify(signature: signature, signingInput: Array(input.utf8), algorithm: .rs256))
        var wrong = signature
        wrong[100] ^= 0x01
        #expect(!key.verify(signature: wrong, signingInput: Array(input.utf8), algorithm: .rs256))
        #expect(!key.verify(signature: signature, signingInput: Array((input + "x").utf8), algorithm: .rs256))
        #expect(!key.verify(signature: signature, signingInput: Array(input.utf8), algorithm: .es256))
        // An RSA private key cannot make ES256 signatures.
        #expect(throws: TransportError.self) {
            _ = try ES256Signer(privateKeyPEM: try String(contentsOfFile: base + ".key", encoding: .utf8))
        }
    }

    @Test func badKeysAreRefused() {
        #expect(throws: TransportError.self) { _ = try JWSPublicKey(pem: "not a key") }
        #expect(throws: TransportError.self) {
            _ = try ES256Signer(privateKeyPEM: "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n")
        }
    }

    /// SEQUENCE { INTEGER r, INTEGER s } → r‖s (32 bytes each), test-side only.
    static func rawSignature(fromDER der: [UInt8]) -> [UInt8]? {
        guard der.count > 8, der[0] == 0x30 else { return nil }
        var index = der[1] & 0x80 == 0 ? 2 : 2 + Int(der[1] & 0x7f)
        var out: [UInt8] = []
        for _ in 0..<2 {
            guard index + 2 <= der.count, der[index] == 0x02 else { return nil }
            let length = Int(der[index + 1])
            var value = Array(der[(index + 2)..<(index + 2 + length)])
            while value.count > 32, value.first == 0 { value.removeFirst() }
            guard value.count <= 32 else { return nil }
            out += [UInt8](repeating: 0, count: 32 - value.count) + value
            index += 2 + length
        }
        return out
    }
}
