import Foundation

/// The JWT header fields the verifier reads. A field of another JSON type counts as absent
/// (the verifier then refuses with that field's own error), as does a missing one; only a
/// header that is not a JSON object fails to decode.
struct IdentityTokenHeader: Decodable {
    var alg: String?

    private enum CodingKeys: String, CodingKey { case alg }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        alg = c.lenientString(.alg)
    }
}

/// The identity token claims the verifier reads (`iss`, `prn` or `sub`, `exp`, `iat`, `nbf`,
/// `nce`, `display_name`, `avatar_url`), each nil when absent or of another JSON type;
/// times are numbers (integers or finite decimals, not booleans).
struct IdentityTokenClaimFields: Decodable {
    var iss: String?
    var prn: String?
    var sub: String?
    var nce: String?
    var display_name: String?
    var avatar_url: String?
    var exp: Double?
    var iat: Double?
    var nbf: Double?

    private enum CodingKeys: String, CodingKey { case iss, prn, sub, nce, display_name, avatar_url, exp, iat, nbf }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = c.lenientString(.iss)
        prn = c.lenientString(.prn)
        sub = c.lenientString(.sub)
        nce = c.lenientString(.nce)
        display_name = c.lenientString(.display_name)
        avatar_url = c.lenientString(.avatar_url)
        exp = c.lenientNumber(.exp)
        iat = c.lenientNumber(.iat)
        nbf = c.lenientNumber(.nbf)
    }
}

extension KeyedDecodingContainer {
    /// The string at `key`; nil when absent or not a string.
    func lenientString(_ key: Key) -> String? {
        (try? decodeIfPresent(JSONValue.self, forKey: key))??.string
    }

    /// The number at `key`; nil when absent, not a number, or not finite.
    func lenientNumber(_ key: Key) -> Double? {
        switch (try? decodeIfPresent(JSONValue.self, forKey: key)) ?? nil {
        case .integer(let i): Double(i)
        case .number(let d) where d.isFinite: d
        default: nil
        }
    }
}
