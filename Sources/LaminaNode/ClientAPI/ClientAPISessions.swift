import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

/// A Client API session: what its token resolves to.
public struct ClientAPISession: Sendable, Hashable {
    public var user: UserID
    /// The device the session stands for (one per `POST /sessions`, a fresh UUID).
    public var device: String
    /// The SHA-256 of the token (what storage keeps).
    public var tokenHash: [UInt8]
    public var expiresAt: Timestamp
}

/// Nonces and session tokens of the Client API (`POST /nonces`, `POST /sessions`,
/// `DELETE /sessions/:token`), for the REST half and the WebSocket half alike.
///
/// Session tokens are the sync protocol's own (SPEC §5.2): the same store records
/// (``SessionRecord``, hashed), the same lifetime, the same revocation (`END_SESSION`, the
/// Server API's `DELETE …/sessions`, ``NodeEngine/revokeSession(token:)``), so one token is
/// one session wherever it is used. Each `POST /sessions` is a device of its own.
///
/// Nonces are the sync protocol's ``NonceTable`` entries, owned not by a connection (a REST
/// client has none that lasts) but by the client's address: single use (a failed login uses
/// its nonce too), expiring after the table's lifetime, at most `perConnection` open per
/// address and `perNode` in all. The replay argument is in `Protocol/CLIENT-API.md`.
public final class ClientAPISessions: Sendable {
    let engine: NodeEngine

    public init(engine: NodeEngine) {
        self.engine = engine
    }

    /// The nonce table's owner for a client address: the address's bytes hashed into the
    /// range `0b10…` (connections count up from 1, in-process sessions down from `UInt64.max`,
    /// so neither meets it). Requests without an address share one owner.
    static func owner(of address: SocketAddress?) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (address?.ipAddress ?? "none").utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return (1 << 63) | (hash & ((1 << 62) - 1))
    }

    /// A fresh nonce for a client at `address`, or `overloaded` when that address (or the
    /// node) holds as many open nonces as it may.
    public func issueNonce(for address: SocketAddress?) -> Result<String, WireError> {
        engine.nonces.issue(to: Self.owner(of: address)).map { $0.nonce }
    }

    /// Verifies `identityToken` (the sync protocol's providers and rules), uses its nonce
    /// (one issued to `address`), and creates a session. A failed attempt uses the nonce up.
    public func createSession(identityToken: String, address: SocketAddress?) async throws -> (
        token: String, session: ClientAPISession
    ) {
        let owner = Self.owner(of: address)
        let now = Timestamp.now()
        do {
            let claims = try engine.verifier.verify(identityToken, now: now)
            try await engine.checkNotSuspended(claims.identity.userID)
            try engine.nonces.use(claims.nonce, by: owner, now: now)
            let (token, hash) = try NodeSession.makeSessionToken()
            let device = UUID().uuidString.lowercased()
            let record = SessionRecord(
                tokenHash: hash, user: claims.identity.userID, device: device, createdAt: now,
                expiresAt: now.adding(engine.configuration.sessionLifetime))
            try await engine.store.write { tx in try tx.createSession(record) }
            return (
                token,
                ClientAPISession(user: record.user, device: device, tokenHash: hash, expiresAt: record.expiresAt)
            )
        } catch {
            if let nonce = IdentityTokenVerifier.unverifiedNonce(identityToken) {
                engine.nonces.spoil(nonce, by: owner)
            }
            throw EngineErrors.wire(error)
        }
    }

    /// The live session of `token`; `session-expired` (unknown or expired) or
    /// `session-revoked` otherwise.
    public func session(forToken token: String) async throws(WireError) -> ClientAPISession {
        guard !token.isEmpty, token.utf8.count <= IdentityTokenVerifier.maxTokenBytes else {
            throw WireError(.sessionExpired, "no session has this token")
        }
        do {
            let hash = try SHA256Hasher.hash(Array(token.utf8))
            let now = Timestamp.now()
            let record = try await engine.store.read { r in try r.session(tokenHash: hash, at: now) }
            return ClientAPISession(
                user: record.user, device: record.device, tokenHash: hash, expiresAt: record.expiresAt)
        } catch {
            if let storage = error as? StorageError, storage.code == .sessionUnknown {
                throw WireError(.sessionExpired, "no live session has this token")
            }
            throw EngineErrors.wire(error)
        }
    }

    /// The user of a live session token (for the WebSocket half); throws as ``session(forToken:)``.
    public func user(forSessionToken token: String) async throws(WireError) -> UserID {
        try await session(forToken: token).user
    }

    /// Revokes the session of `token` (its sync streams end too). Returns whether a live
    /// session was revoked.
    @discardableResult
    public func revoke(token: String) async throws -> Bool {
        guard token.utf8.count <= IdentityTokenVerifier.maxTokenBytes else { return false }
        return try await engine.revokeSession(token: token)
    }
}
