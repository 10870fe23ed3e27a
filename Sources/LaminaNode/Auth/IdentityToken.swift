import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

/// What a verified identity token says.
public struct IdentityClaims: Hashable, Sendable {
    public var provider: String
    public var identity: Identity
    /// The `nce` claim: a nonce the node must have issued (checked against storage separately).
    public var nonce: String
}

/// Verifies identity tokens (JWT, JWS compact serialization) against the configured providers.
/// Every failure is a `WireError` with its own code of SPEC §9.2. Checks run in this order:
/// size and shape, header JSON, `alg` among RS256/ES256, claims JSON, `iss` known, `alg`
/// allowed for that provider, signature, user id, `exp`/`iat`/`nbf` with leeway, `nce`.
public struct IdentityTokenVerifier: Sendable {
    /// The largest token accepted (bytes).
    public static let maxTokenBytes = 8192
    /// The algorithms this node implements; anything else (`none`, HS256, ...) is refused.
    public static let supportedAlgorithms: Set<String> = ["RS256", "ES256"]

    struct Provider: Sendable {
        var configuration: IdentityProvider
        var key: JWSPublicKey?
    }

    let providers: [String: Provider]
    public let maxClockSkew: Duration

    public init(providers: [IdentityProvider], maxClockSkew: Duration) {
        var map: [String: Provider] = [:]
        for provider in providers {
            map[provider.id] = Provider(configuration: provider, key: try? JWSPublicKey(pem: provider.publicKeyPEM))
        }
        self.providers = map
        self.maxClockSkew = maxClockSkew
    }

    /// The claims of `token` if it is well formed, signed by a configured provider and valid at `now`.
    public func verify(_ token: String, now: Timestamp) throws(WireError) -> IdentityClaims {
        guard token.utf8.count <= Self.maxTokenBytes else {
            throw WireError(
                .malformedToken, "the identity token has \(token.utf8.count) bytes, more than \(Self.maxTokenBytes)")
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw WireError(.malformedToken, "a JWT has 3 dot-separated parts, this has \(parts.count)")
        }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimsBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else {
            throw WireError(.malformedToken, "a JWT part is not base64url")
        }
        let header = try Self.decode(IdentityTokenHeader.self, headerBytes, "header")
        guard let alg = header.alg else { throw WireError(.malformedToken, "the JWT header has no alg") }
        guard Self.supportedAlgorithms.contains(alg), let algorithm = JWSAlgorithm(rawValue: alg) else {
            throw WireError(.algorithmNotAllowed, "algorithm \(alg.prefix(32)) is not allowed")
        }
        let claims = try Self.decode(IdentityTokenClaimFields.self, claimsBytes, "claims")
        guard let issuer = claims.iss else { throw WireError(.malformedToken, "the token has no iss claim") }
        guard let provider = providers[issuer] else {
            throw WireError(.unknownProvider, "no identity provider \(issuer.prefix(64)) is configured")
        }
        guard provider.configuration.algorithms.contains(alg) else {
            throw WireError(.algorithmNotAllowed, "provider \(issuer.prefix(64)) does not allow \(alg)")
        }
        guard let key = provider.key else {
            throw WireError(.badSignature, "the public key of provider \(issuer.prefix(64)) cannot be loaded")
        }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard key.verify(signature: signature, signingInput: signingInput, algorithm: algorithm) else {
            throw WireError(.badSignature, "the token's signature does not verify with the key of \(issuer.prefix(64))")
        }
        guard let subject = claims.prn ?? claims.sub else {
            throw WireError(.malformedToken, "the token has no prn or sub claim")
        }
        guard let user = try? UserID(subject) else {
            throw WireError(.malformedToken, "the token's user id is not a valid user id")
        }
        guard !user.isSystemSender else {
            throw WireError(
                .malformedToken,
                "the token's user id has the reserved form of a system sender (\(UserID.systemSenderPrefix))")
        }
        let nowSeconds = Double(now.millisecondsSince1970) / 1000
        let skew = Double(maxClockSkew.components.seconds)
        guard let exp = claims.exp, let iat = claims.iat else {
            throw WireError(.malformedToken, "the token needs numeric iat and exp claims")
        }
        guard exp + skew >= nowSeconds else { throw WireError(.tokenExpired, "the token expired at \(Int64(exp))") }
        guard iat - skew <= nowSeconds else {
            throw WireError(.tokenNotYetValid, "the token is issued in the future (\(Int64(iat)))")
        }
        if let nbf = claims.nbf, nbf - skew > nowSeconds {
            throw WireError(.tokenNotYetValid, "the token is not valid before \(Int64(nbf))")
        }
        guard let nonce = claims.nce, !nonce.isEmpty else {
            throw WireError(.malformedToken, "the token has no nce claim")
        }
        let identity = Identity(userID: user, displayName: claims.display_name, avatarURL: claims.avatar_url)
        guard (try? identity.validate()) != nil else {
            throw WireError(.malformedToken, "the token's display name or avatar URL is invalid")
        }
        return IdentityClaims(provider: issuer, identity: identity, nonce: nonce)
    }

    /// The `nce` claim of `token` read without verifying anything else (nil when the claims
    /// do not decode): the nonce a failed login uses up.
    static func unverifiedNonce(_ token: String) -> String? {
        guard token.utf8.count <= maxTokenBytes else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(parts[1]),
            let claims = try? JSONDecoder().decode(IdentityTokenClaimFields.self, from: Data(bytes))
        else { return nil }
        return claims.nce
    }

    static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8], _ what: String) throws(WireError) -> T {
        guard let value = try? JSONDecoder().decode(T.self, from: Data(bytes)) else {
            throw WireError(.malformedToken, "the JWT \(what) is not a JSON object")
        }
        return value
    }
}
