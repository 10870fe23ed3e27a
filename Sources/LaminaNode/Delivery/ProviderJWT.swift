import Foundation
import LaminaTransport
import NIOConcurrencyHelpers

/// JWS compact serialization of the providers' tokens: APNs provider tokens (ES256) and FCM
/// service-account assertions (RS256). Keys and claims are written in sorted order.
enum ProviderJWT {
    static func make(header: JWTHeader, claims: some Encodable, sign: ([UInt8]) throws -> [UInt8]) throws -> String {
        func part(_ value: some Encodable) throws -> String { Base64URL.encode(Array(try ServerAPIJSON.encode(value))) }
        let signingInput = "\(try part(header)).\(try part(claims))"
        return "\(signingInput).\(Base64URL.encode(try sign(Array(signingInput.utf8))))"
    }
}

/// A bearer token a provider issued or that we signed, kept until shortly before it expires.
final class CachedToken: Sendable {
    private let state = NIOLockedValueBox<(token: String, until: ContinuousClock.Instant)?>(nil)

    /// The cached token, if still good.
    var current: String? {
        state.withLockedValue { s in
            guard let s, ContinuousClock.now < s.until else { return nil }
            return s.token
        }
    }

    func set(_ token: String, validFor: Duration) { state.withLockedValue { $0 = (token, .now + validFor) } }

    /// Forgets the token (the provider refused it).
    func invalidate() { state.withLockedValue { $0 = nil } }
}
