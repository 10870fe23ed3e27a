import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import LaminaWireFuzzChecks

/// The properties of the node's hand-written parsers that face the network, checked by the
/// fuzz targets (Fuzz/) on random input and by `NodeFuzzReplayTests` on saved inputs. Each
/// check throws the `PropertyViolation` it found; it never traps.
public enum NodeFuzzChecks {
    /// Content request headers (CONTENT.md §3, §5): the input is header lines `name: value`
    /// separated by `\n`. Upload headers either validate into values within their limits or
    /// are refused with `400`/`413`, never anything else; a `range` header resolves, for
    /// several content sizes, to the whole content, a range inside it, or unsatisfiable.
    public static func checkContentHeaders(_ input: [UInt8]) throws(PropertyViolation) {
        var headers = HeaderFields()
        for line in input.split(separator: 0x0A, omittingEmptySubsequences: true).prefix(64) {
            let text = String(decoding: line, as: UTF8.self)
            guard let colon = text.firstIndex(of: ":") else { continue }
            headers.append(
                String(text[..<colon]).lowercased(),
                String(text[text.index(after: colon)...]).trimmingCharacters(in: [" ", "\t"]))
        }
        var accepted: UploadRequestHeaders?
        do {
            accepted = try UploadRequestHeaders(headers)
        } catch {
            guard error.status == 400 || error.status == 413 else {
                throw PropertyViolation(property: "upload-headers", detail: "refused with \(error)", input: input)
            }
        }
        if let upload = accepted {
            guard upload.size <= Limits.maxPartBytes, upload.sha256.count == 32, upload.offset <= upload.size,
                upload.contentLength.map({ $0 <= upload.size - upload.offset }) ?? true
            else {
                throw PropertyViolation(
                    property: "upload-headers", detail: "accepted out of range: \(upload)", input: input)
            }
        }
        for size: UInt64 in [0, 1, 1_000, Limits.maxPartBytes] {
            switch ByteRangeRequest(header: headers["range"], size: size) {
            case .whole, .unsatisfiable: break
            case .range(let lower, let upper):
                guard lower <= upper, upper < size else {
                    throw PropertyViolation(
                        property: "byte-range", detail: "\(lower)...\(upper) for a content of \(size) bytes",
                        input: input)
                }
            }
        }
    }

    /// A verifier with one ES256 provider `fuzz` (``fuzzProviderPublicKeyPEM``).
    static let verifier = IdentityTokenVerifier(
        providers: [
            IdentityProvider(id: "fuzz", publicKeyPEM: fuzzProviderPublicKeyPEM, algorithms: ["ES256", "RS256"])
        ],
        maxClockSkew: .seconds(60))

    /// The public key of the fuzz provider (its private key signed the seed tokens).
    public static let fuzzProviderPublicKeyPEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEK/KV0fmJF/Ku2/bu0F0OXf2T6+Tj
        BMhQgWOtNa7Ja0+pqCRRcFBbU9m49klZNiih0mdY4PStbcBhZkDpFGkwjw==
        -----END PUBLIC KEY-----

        """

    /// Identity tokens (SPEC §5.2): any input, as the token string, verifies or is refused
    /// with an authentication (2xx) or validation (4xx) code, never another error.
    public static func checkIdentityToken(_ input: [UInt8]) throws(PropertyViolation) {
        let token = String(decoding: input, as: UTF8.self)
        do {
            _ = try verifier.verify(token, now: Timestamp(millisecondsSince1970: 1_800_000_000_000))
        } catch {
            let value = error.code.wireValue
            guard (200..<300).contains(value) || (400..<500).contains(value) else {
                throw PropertyViolation(
                    property: "identity-token", detail: "refused with \(error.code.name): \(error.reason)", input: input
                )
            }
        }
    }
}
